//! Client commands: round trips, split points, the inline form, keys() and display().

mod common;

use common::split;
use proptest::collection::vec;
use proptest::prelude::*;
use resp::{Command, command_len, parse_command};

fn args() -> impl Strategy<Value = Vec<Vec<u8>>> {
    vec(common::blob(), 0..6)
}

fn cmd(args: &[&str]) -> Command {
    Command::new(args)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn commands_round_trip_and_every_prefix_is_incomplete(args in args(), trailing in vec(any::<u8>(), 0..4)) {
        let c = Command { args };
        let bytes = c.to_bytes();
        let mut buf = bytes.clone();
        buf.extend_from_slice(&trailing);
        prop_assert_eq!(parse_command(&buf), Ok(Some((c, bytes.len()))));
        prop_assert_eq!(command_len(&buf), Ok(Some(bytes.len())));
        for k in 0..bytes.len() {
            prop_assert_eq!(parse_command(&bytes[..k]), Ok(None), "prefix of {} bytes", k);
            prop_assert_eq!(command_len(&bytes[..k]), Ok(None), "prefix of {} bytes", k);
        }
    }

    #[test]
    fn a_command_pipeline_fed_in_chunks_yields_the_commands(
        commands in vec(args(), 1..4),
        sizes in common::chunks(),
    ) {
        let commands: Vec<Command> = commands.into_iter().map(|args| Command { args }).collect();
        let mut stream = Vec::new();
        for c in &commands {
            c.encode(&mut stream);
        }
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for chunk in split(&stream, &sizes) {
            buf.extend_from_slice(chunk);
            while let Some((c, n)) = parse_command(&buf).expect("valid stream") {
                got.push(c);
                buf.drain(..n);
            }
        }
        prop_assert_eq!(got, commands);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn inline_commands_parse(
        words in vec("[a-zA-Z0-9_:.{}-]{1,12}", 1..6),
        sep in prop::sample::select(vec![" ", "  ", "\t", " \t "]),
        end in prop::sample::select(vec!["\r\n", "\n"]),
    ) {
        let line = format!("{}{end}", words.join(sep));
        let want = Command { args: words.iter().map(|w| w.as_bytes().to_vec()).collect() };
        prop_assert_eq!(parse_command(line.as_bytes()), Ok(Some((want, line.len()))));
        for k in 0..line.len() {
            // A strict prefix has no newline yet (the only `\n` is the last byte).
            prop_assert_eq!(parse_command(&line.as_bytes()[..k]), Ok(None));
        }
    }
}

#[test]
fn inline_forms() {
    let ok = |line: &[u8], args: &[&[u8]]| {
        assert_eq!(
            parse_command(line),
            Ok(Some((Command::new(args), line.len()))),
            "{}",
            String::from_utf8_lossy(line)
        );
    };
    ok(b"PING\r\n", &[b"PING"]);
    ok(b"PING\n", &[b"PING"]);
    ok(b"SET a b\r\n", &[b"SET", b"a", b"b"]);
    ok(b"  SET   a\tb  \r\n", &[b"SET", b"a", b"b"]);
    ok(b"\r\n", &[]);
    ok(b"\n", &[]);
    ok(b"SET k \"hello world\"\r\n", &[b"SET", b"k", b"hello world"]);
    ok(b"SET k \"a\\\"b\"\r\n", &[b"SET", b"k", b"a\"b"]);
    ok(b"SET k \"\\x41\\n\\\\\"\r\n", &[b"SET", b"k", b"A\n\\"]);
    ok(b"SET k 'it\\'s'\r\n", &[b"SET", b"k", b"it's"]);
    ok(b"SET k \"\"\r\n", &[b"SET", b"k", b""]);
    ok(b"SET k a\"b c\"\r\n", &[b"SET", b"k", b"ab c"]);
    // redis-server treats a NUL as the end of the line.
    ok(b"GET a\0b\r\n", &[b"GET", b"a"]);
    // Two inline commands in a row.
    let two = b"PING\r\nECHO x\n";
    assert_eq!(parse_command(two), Ok(Some((Command::new(["PING"]), 6))));
    assert_eq!(parse_command(&two[6..]), Ok(Some((Command::new(["ECHO", "x"]), 7))));
    // Empty commands in the array form, which redis-server ignores.
    assert_eq!(parse_command(b"*0\r\n"), Ok(Some((Command::default(), 4))));
    assert_eq!(parse_command(b"*-1\r\n"), Ok(Some((Command::default(), 5))));
    assert_eq!(parse_command(b""), Ok(None));
}

#[test]
fn an_announced_length_is_only_a_promise() {
    // A client may announce a value up to MAX_BULK_LEN; until its bytes are there the command
    // is incomplete, and nothing is built for it (the fault proxy's buffer grows with the bytes
    // that arrive, within its memory budget).
    let announce = |len: usize| format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${len}\r\n").into_bytes();
    let mut buf = announce(resp::MAX_BULK_LEN);
    buf.extend_from_slice(&[b'x'; 1000]);
    assert_eq!(command_len(&buf), Ok(None));
    assert_eq!(parse_command(&buf), Ok(None));
    // Past the limit it is refused at the header, before any of the data.
    let over = announce(resp::MAX_BULK_LEN + 1);
    assert!(matches!(command_len(&over), Err(resp::ParseError::BulkTooLong { .. })));
    assert!(matches!(
        parse_command(&over),
        Err(resp::ParseError::BulkTooLong { .. })
    ));
    // What the announcement promised, kept: a complete command.
    let mut kept = announce(3);
    kept.extend_from_slice(b"abc\r\n");
    assert_eq!(command_len(&kept), Ok(Some(kept.len())));
    assert_eq!(parse_command(&kept), Ok(Some((cmd(&["SET", "k", "abc"]), kept.len()))));
}

#[test]
fn name_upper() {
    assert_eq!(cmd(&["evalsha", "x"]).name_upper(), "EVALSHA");
    assert_eq!(Command::default().name_upper(), "");
    assert!(cmd(&["Get", "k"]).is("GET"));
    assert!(!Command::default().is("GET"));
}

#[test]
fn keys_table() {
    let table: &[(&[&str], &[&str])] = &[
        (&["GET", "k"], &["k"]),
        (&["get", "k"], &["k"]),
        (&["SET", "k", "v", "EX", "10", "NX"], &["k"]),
        (&["INCR", "k"], &["k"]),
        (&["INCRBY", "k", "5"], &["k"]),
        (&["DECR", "k"], &["k"]),
        (&["EXPIRE", "k", "10", "NX"], &["k"]),
        (&["PEXPIRE", "k", "10"], &["k"]),
        (&["EXPIREAT", "k", "10"], &["k"]),
        (&["PEXPIREAT", "k", "10"], &["k"]),
        (&["TTL", "k"], &["k"]),
        (&["PTTL", "k"], &["k"]),
        (&["PERSIST", "k"], &["k"]),
        (&["TYPE", "k"], &["k"]),
        (&["GETEX", "k", "EX", "1"], &["k"]),
        (&["GETDEL", "k"], &["k"]),
        (&["SETNX", "k", "v"], &["k"]),
        (&["SETEX", "k", "1", "v"], &["k"]),
        (&["PSETEX", "k", "1", "v"], &["k"]),
        (&["INCRBYFLOAT", "k", "1.5"], &["k"]),
        (&["HGET", "h", "f"], &["h"]),
        (&["HSET", "h", "f", "v", "g", "w"], &["h"]),
        (&["HMGET", "h", "f", "g"], &["h"]),
        (&["HINCRBY", "h", "f", "1"], &["h"]),
        (&["HGETALL", "h"], &["h"]),
        (&["ZADD", "z", "1", "m"], &["z"]),
        (&["ZCARD", "z"], &["z"]),
        (&["ZCOUNT", "z", "-inf", "+inf"], &["z"]),
        (&["ZRANGE", "z", "0", "-1"], &["z"]),
        (&["ZREMRANGEBYSCORE", "z", "0", "10"], &["z"]),
        (&["ZRANGEBYSCORE", "z", "0", "10"], &["z"]),
        (&["LPUSH", "l", "a", "b"], &["l"]),
        (&["RPUSH", "l", "a"], &["l"]),
        (&["LRANGE", "l", "0", "-1"], &["l"]),
        (&["LLEN", "l"], &["l"]),
        (&["LTRIM", "l", "0", "9"], &["l"]),
        (&["MGET", "a", "b", "c"], &["a", "b", "c"]),
        (&["DEL", "a", "b"], &["a", "b"]),
        (&["EXISTS", "a", "b"], &["a", "b"]),
        (&["UNLINK", "a"], &["a"]),
        (&["TOUCH", "a", "b"], &["a", "b"]),
        (&["WATCH", "a", "b"], &["a", "b"]),
        (&["MSET", "k1", "v1", "k2", "v2"], &["k1", "k2"]),
        (&["MSET", "k1", "v1", "k2"], &["k1", "k2"]),
        (&["MSETNX", "k1", "v1"], &["k1"]),
        (&["EVALSHA", "sha", "2", "k1", "k2", "a"], &["k1", "k2"]),
        (&["EVAL", "return 1", "0"], &[]),
        (&["EVAL", "return 1", "1", "k", "arg"], &["k"]),
        (&["EVAL_RO", "s", "1", "k"], &["k"]),
        (&["EVALSHA_RO", "s", "1", "k"], &["k"]),
        (&["FCALL", "f", "2", "a", "b", "c"], &["a", "b"]),
        (&["FCALL_RO", "f", "1", "a"], &["a"]),
        (&["EVALSHA", "sha", "3", "k1"], &[]),
        (&["EVALSHA", "sha", "-1", "k1"], &[]),
        (&["EVALSHA", "sha", "x", "k1"], &[]),
        (&["EVALSHA", "sha", "+1", "k1"], &[]),
        (&["EVALSHA", "sha", "99999999999999999999999", "k1"], &[]),
        (&["EVALSHA", "sha"], &[]),
        (&["EVALSHA"], &[]),
        (
            &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
            &["d", "a", "b"],
        ),
        (&["ZINTER", "2", "a", "b"], &["a", "b"]),
        (&["LMPOP", "2", "a", "b", "LEFT"], &["a", "b"]),
        (&["BLMPOP", "0", "1", "a", "LEFT"], &["a"]),
        (&["BLPOP", "a", "b", "0"], &["a", "b"]),
        (&["BLPOP"], &[]),
        (&["RENAME", "a", "b"], &["a", "b"]),
        (&["LMOVE", "a", "b", "LEFT", "RIGHT"], &["a", "b"]),
        (&["OBJECT", "ENCODING", "k"], &["k"]),
        (&["OBJECT", "HELP"], &[]),
        (&["MEMORY", "usage", "k"], &["k"]),
        (&["XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"], &["s1", "s2"]),
        (&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", ">"], &["s1"]),
        (&["MULTI"], &[]),
        (&["EXEC"], &[]),
        (&["DISCARD"], &[]),
        (&["PING"], &[]),
        (&["PING", "hello"], &[]),
        (&["SCRIPT", "LOAD", "return 1"], &[]),
        (&["TIME"], &[]),
        (&["INFO", "memory"], &[]),
        (&["CONFIG", "SET", "maxmemory", "1mb"], &[]),
        (&["SCAN", "0", "MATCH", "rl:*"], &[]),
        (&["SELECT", "1"], &[]),
        (&["AUTH", "user", "pass"], &[]),
        (&["HELLO", "3"], &[]),
        (&["CLIENT", "SETNAME", "x"], &[]),
        (&["SUBSCRIBE", "ch"], &[]),
        (&["PSUBSCRIBE", "ch*"], &[]),
        (&["UNSUBSCRIBE", "ch"], &[]),
        (&["PUNSUBSCRIBE"], &[]),
        (&["PUBLISH", "ch", "msg"], &[]),
        (&["QUIT"], &[]),
        (&["RESET"], &[]),
        (&["ECHO", "x"], &[]),
        (&["DBSIZE"], &[]),
        (&["FLUSHALL", "ASYNC"], &[]),
        (&["FLUSHDB"], &[]),
        (&["KEYS", "*"], &[]),
        (&["COMMAND", "DOCS"], &[]),
        (&["READONLY"], &[]),
        (&["SOMEMODULE.CMD", "k", "x"], &["k"]),
        (&["AVERYVERYLONGUNKNOWNCOMMANDNAME", "k"], &["k"]),
        (&["GET"], &[]),
    ];
    for (args, want) in table {
        let c = cmd(args);
        let got: Vec<&[u8]> = c.keys();
        let want: Vec<&[u8]> = want.iter().map(|k| k.as_bytes()).collect();
        assert_eq!(got, want, "{args:?}");
    }
    assert!(Command::default().keys().is_empty());
}

#[test]
fn display_is_short_and_printable() {
    assert_eq!(cmd(&["SET", "k", "v"]).display(), "SET k v");
    assert_eq!(
        Command::new([&b"GET"[..], b"a\x00\xff\r\n", b"", b"back\\slash"]).display(),
        "GET a\\x00\\xff\\x0d\\x0a \"\" back\\\\slash"
    );
    let long = "x".repeat(100);
    let d = cmd(&["SET", &long, "v"]).display();
    assert_eq!(d, format!("SET {}… v", "x".repeat(64)));
    let many: Vec<String> = (0..1000).map(|i| format!("k{i}")).collect();
    let mut args = vec!["MGET".to_string()];
    args.extend(many);
    let d = Command::new(&args).display();
    assert!(d.chars().count() <= 201, "{} chars", d.chars().count());
    assert!(d.starts_with("MGET k0 k1 k2"));
    assert!(d.ends_with('…'));
    assert_eq!(Command::default().display(), "");
}
