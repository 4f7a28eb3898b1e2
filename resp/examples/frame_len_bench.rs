//! Throughput of the proxy's hot paths: `frame_len` over a buffer of 100k small replies (the reply
//! side), with `parse` and `parse_command` for comparison.
//!
//! `cargo run --release -p limiter-resp --example frame_len_bench`

use std::hint::black_box;
use std::time::{Duration, Instant};

const FRAMES: usize = 100_000;

/// Runs `pass` (one walk over `buf`, returning the frames found) until `min` has elapsed; prints
/// MB/s and frames/s.
fn bench(name: &str, buf: &[u8], frames: usize, min: Duration, pass: impl Fn(&[u8]) -> usize) {
    assert_eq!(pass(buf), frames, "{name}: wrong frame count");
    let start = Instant::now();
    let mut passes = 0u64;
    while start.elapsed() < min {
        black_box(pass(black_box(buf)));
        passes += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = buf.len() as f64 * passes as f64;
    println!(
        "{name:<28} {:>8.0} MB/s {:>7.1} M frames/s ({passes} passes of {} bytes)",
        bytes / secs / 1e6,
        frames as f64 * passes as f64 / secs / 1e6,
        buf.len(),
    );
}

fn main() {
    let min = Duration::from_secs(2);

    let replies: [&[u8]; 3] = [b":1\r\n", b"+OK\r\n", b"$3\r\nfoo\r\n"];
    let mut buf = Vec::new();
    for i in 0..FRAMES {
        buf.extend_from_slice(replies[i % 3]);
    }
    bench("frame_len small replies", &buf, FRAMES, min, |buf| {
        let (mut p, mut n) = (0, 0);
        while let Some(len) = resp::frame_len(&buf[p..]).expect("valid") {
            p += len;
            n += 1;
        }
        n
    });
    bench("parse small replies", &buf, FRAMES, min, |buf| {
        let (mut p, mut n) = (0, 0);
        while let Some((v, len)) = resp::parse(&buf[p..]).expect("valid") {
            black_box(v);
            p += len;
            n += 1;
        }
        n
    });

    // Arrays: e.g. MGET / EXEC replies.
    let array = resp::Value::Array(vec![
        resp::Value::Integer(1),
        resp::Value::Bulk(b"value".to_vec()),
        resp::Value::NullBulk,
        resp::Value::SimpleString(b"OK".to_vec()),
    ])
    .to_bytes();
    let arrays = array.repeat(FRAMES / 4);
    bench("frame_len 4-element arrays", &arrays, FRAMES / 4, min, |buf| {
        let (mut p, mut n) = (0, 0);
        while let Some(len) = resp::frame_len(&buf[p..]).expect("valid") {
            p += len;
            n += 1;
        }
        n
    });

    // The request side: a pipeline of SET commands.
    let command = resp::Command::new(["SET", "rl:user:12345", "1"]).to_bytes();
    let commands = command.repeat(FRAMES);
    bench("parse_command SET k v", &commands, FRAMES, min, |buf| {
        let (mut p, mut n) = (0, 0);
        while let Some((c, len)) = resp::parse_command(&buf[p..]).expect("valid") {
            black_box(c);
            p += len;
            n += 1;
        }
        n
    });
    bench("command_len SET k v", &commands, FRAMES, min, |buf| {
        let (mut p, mut n) = (0, 0);
        while let Some(len) = resp::command_len(&buf[p..]).expect("valid") {
            p += len;
            n += 1;
        }
        n
    });
}
