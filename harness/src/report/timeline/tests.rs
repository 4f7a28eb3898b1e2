//! The timeline rendered from hand-written histories: well-formed SVG, anomalies where and
//! when they happened, a loud span for a key without expiry, escaped text, the same bytes
//! for the same run, and a bounded file for a huge one.

use std::time::Instant;

use super::frame::{X0, X1};
use super::{TIMELINE_FILE, TimelineLimits, render_timeline, write_timeline};
use crate::checker::fixtures::{HistoryBuilder, SAMPLE_SPAN_US, config, key, limit, run};
use crate::checker::{CheckResult, TtlBound, Verdict};
use crate::history::{Event, HistoryIndex, KeySample, Outcome};
use crate::keys::KeyLayout;
use crate::report::{KeysSummary, LimiterSummary, Observed, Report, ServerSummary, render_markdown};
use crate::scenario::{Algorithm, FaultKind, Invariant, Limit};

const SVG_NS: &str = "http://www.w3.org/2000/svg";

/// A report of `results` for the default limit, as the runner would assemble it.
fn report_of(limit: &Limit, results: Vec<CheckResult>) -> Report {
    let layout = layout_of(limit);
    let ttl = TtlBound::resolve(limit, &config(&[]), Algorithm::FixedWindow, None);
    Report {
        scenario: "immortal-counter".into(),
        about: String::new(),
        scenario_file: "scenarios/immortal-counter.toml".into(),
        seed: 7,
        limiter: LimiterSummary {
            name: "get-then-incr".into(),
            algorithm: Algorithm::FixedWindow,
            round_trips_max: 2,
            commands: "GET; INCR".into(),
        },
        server: ServerSummary {
            topology: None,
            version: "redis 7.0.15".into(),
            backend: "process".into(),
            settings: Vec::new(),
            cache_server: None,
        },
        keys: KeysSummary::new(&layout, None, ttl, None),
        verdict: results.iter().fold(Verdict::Valid, |v, c| v.merge(c.verdict)),
        invariants: results,
        faults: Vec::new(),
        requests_scheduled: 0,
        reproduce: "(test)".into(),
        problems: Vec::new(),
        timeline: None,
        observed: Observed::default(),
    }
}

fn layout_of(limit: &Limit) -> KeyLayout {
    KeyLayout::default_for(&limit.key_prefix, limit.identities)
}

/// Identity 0 admitted up to the limit, then its key expires under a fault and comes back
/// without TTL, and stays so to the final audit at 3 s; identity 1 is healthy throughout.
fn immortal_history(prefix_key: &dyn Fn(u32) -> String) -> HistoryBuilder {
    let (k0, k1) = (prefix_key(0), prefix_key(1));
    let mut h = HistoryBuilder::new()
        .phase(0, "traffic", 0, 2000)
        .phase(1, "quiet", 2000, 3000);
    for i in 0..20u64 {
        let count = i64::try_from(i % 10 + 1).unwrap();
        let (id0, id1) = (2 * i + 1, 2 * i + 2);
        let (k0s, k1s) = ([k0.as_str()], [k1.as_str()]);
        h = h.allowed_on(id0, 0, (i * 100, i * 100 + 2), Some(count), &k0s);
        h = h.allowed_on(id1, 1, (i * 100 + 50, i * 100 + 52), Some(count), &k1s);
    }
    h = h.fault(1205, FaultKind::ExpireBetweenRoundTrips, Some(25), Some(k0.as_str()));
    h = h.keyspace(1205, &k0, "expired").keyspace(1000, &k1, "expired");
    for t in (0..3000).step_by(250) {
        let pttl0 = if t < 1250 {
            1000 - i64::try_from(t % 1000).unwrap()
        } else {
            -1
        };
        let pttl1 = 1000 - i64::try_from(t % 1000).unwrap();
        h = h.sample(t, false, &[(&k0, pttl0, Some("7")), (&k1, pttl1, Some("3"))]);
    }
    h.sample(3000, true, &[(&k0, -1, Some("7"))])
}

struct Rendered {
    svg: String,
    report: Report,
    end_us: u64,
}

/// Judge and render `history` under `limit`, as the runner does.
fn render(history: &HistoryBuilder, limit: &Limit) -> Rendered {
    let invariants = [Invariant::TtlPresent, Invariant::NoLockout];
    let results = run(history.events(), limit, &config(&invariants), Algorithm::FixedWindow);
    let report = report_of(limit, results);
    let layout = layout_of(limit);
    let index = HistoryIndex::new(history.events().to_vec(), &layout);
    let limits = TimelineLimits {
        requests_max: limit.requests_max,
        window_ms: limit.window_ms,
        layout: &layout,
    };
    Rendered {
        svg: render_timeline(&index, &report, &limits),
        end_us: super::end_us(&index, &report),
        report,
    }
}

fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("the timeline is XML: {e}\n{svg}"))
}

fn with_class<'a, 'i>(doc: &'a roxmltree::Document<'i>, class: &str) -> Vec<roxmltree::Node<'a, 'i>> {
    doc.descendants()
        .filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|c| c == class)))
        .collect()
}

#[test]
fn the_timeline_is_svg_with_each_anomaly_at_its_moment_on_its_lane() {
    let r = render(&immortal_history(&key), &limit());
    let doc = parse(&r.svg);
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.tag_name().namespace(), Some(SVG_NS));
    let immortal = r.report.invariants[0].anomalies.first().expect("an immortal key");
    assert_eq!(
        (immortal.kind.as_str(), immortal.key.as_str()),
        ("immortal-key", "rl:0")
    );
    let marks = with_class(&doc, "anomaly");
    let mark = marks
        .iter()
        .find(|m| m.attribute("data-kind") == Some("immortal-key"))
        .expect("the immortal key is marked");
    assert_eq!(mark.attribute("data-key"), Some("rl:0"));
    let line = mark.children().find(|c| c.has_tag_name("line")).expect("a line");
    let x: f64 = line.attribute("x1").unwrap().parse().unwrap();
    assert!((X0..=X1).contains(&x), "{x}");
    let expected = X0 + (X1 - X0) * immortal.t_us as f64 / r.end_us as f64;
    assert!((x - expected).abs() <= 0.1, "x {x}, expected {expected}");
    // On identity 0's lane.
    let lane = mark.ancestors().find(|a| a.attribute("class") == Some("lane"));
    let lane_0 = with_class(&doc, "lane")
        .into_iter()
        .find(|l| l.attribute("data-identity") == Some("0"))
        .expect("lane 0");
    let lane_y = |n: roxmltree::Node<'_, '_>| -> f64 {
        n.descendants()
            .find(|c| c.attribute("class") == Some("box"))
            .and_then(|c| c.attribute("y"))
            .unwrap()
            .parse()
            .unwrap()
    };
    let y1: f64 = line.attribute("y1").unwrap().parse().unwrap();
    assert!(lane.is_none(), "anomalies are drawn above every lane");
    assert!(y1 < lane_y(lane_0) && y1 + 20.0 > lane_y(lane_0), "y1 {y1} at lane 0");
    let title = mark.children().find(|c| c.has_tag_name("title")).unwrap();
    assert!(title.text().unwrap().contains("no expiry"), "{:?}", title.text());
}

#[test]
fn a_key_sampled_without_expiry_gets_a_red_span_from_that_sample_to_the_end() {
    let r = render(&immortal_history(&key), &limit());
    let doc = parse(&r.svg);
    let spans: Vec<_> = with_class(&doc, "no-ttl")
        .into_iter()
        .filter(|s| s.has_attribute("data-key"))
        .collect();
    assert_eq!(spans.len(), 1, "only rl:0 lost its TTL");
    assert_eq!(spans[0].attribute("data-key"), Some("rl:0"));
    let title = spans[0]
        .children()
        .find(|c| c.has_tag_name("title"))
        .unwrap()
        .text()
        .unwrap();
    assert!(title.contains("1.250 s – the run's end"), "{title}");
    let d = spans[0].children().find(|c| c.has_tag_name("path")).unwrap();
    let x: f64 = d.attribute("d").unwrap()[1..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let from_us = 1_250_000 + SAMPLE_SPAN_US / 2;
    let expected = X0 + (X1 - X0) * from_us as f64 / r.end_us as f64;
    assert!((x - expected).abs() <= 0.1, "x {x}, expected {expected}");
    assert!(r.svg.contains(">no TTL</text>"), "labelled");
}

#[test]
fn phases_faults_and_keyspace_events_are_drawn_with_hover_text() {
    let r = render(&immortal_history(&key), &limit());
    let doc = parse(&r.svg);
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    let has = |needle: &str| titles.iter().any(|t| t.contains(needle));
    assert!(has("phase traffic: 0.000 s – 2.000 s"), "{titles:#?}");
    assert!(has("phase quiet"), "{titles:#?}");
    assert!(has("expire-between-round-trips (fault 0) at 1.205 s"), "{titles:#?}");
    assert!(has("rl:0 expired at 1.205 s"), "{titles:#?}");
    assert!(has("identity 0: 20 allowed"), "{titles:#?}");
    let strikes = with_class(&doc, "fault")
        .into_iter()
        .filter(|f| f.children().any(|c| c.has_tag_name("title")))
        .count();
    assert_eq!(strikes, 1, "one strike, one mark");
}

#[test]
fn keys_and_names_are_escaped() {
    let mut limit = limit();
    limit.key_prefix = "k<&\"'>:".into();
    let r = render(&immortal_history(&|i| limit.key(i)), &limit);
    let doc = parse(&r.svg);
    let mark = with_class(&doc, "anomaly")
        .into_iter()
        .find(|m| m.attribute("data-kind") == Some("immortal-key"))
        .expect("marked");
    assert_eq!(mark.attribute("data-key"), Some("k<&\"'>:0"));
    assert!(r.svg.contains("data-key=\"k&lt;&amp;&quot;&#39;&gt;:0\""));
    assert!(!r.svg.contains("k<&"), "no raw key in the document");
}

#[test]
fn the_same_history_gives_the_same_bytes() {
    let a = render(&immortal_history(&key), &limit());
    let b = render(&immortal_history(&key), &limit());
    assert_eq!(a.svg, b.svg);
}

#[test]
fn lanes_with_anomalies_come_first_and_at_most_twelve_are_drawn() {
    let mut limit = limit();
    limit.identities = 30;
    let mut h = HistoryBuilder::new();
    for identity in 0..30u32 {
        let k = limit.key(identity);
        h = h.allowed_on(u64::from(identity) + 1, identity, (10, 12), Some(1), &[k.as_str()]);
    }
    let k = limit.key(25);
    h = h.sample(500, true, &[(k.as_str(), -1, Some("1"))]);
    let r = render(&h, &limit);
    let doc = parse(&r.svg);
    let lanes: Vec<&str> = with_class(&doc, "lane")
        .iter()
        .filter_map(|l| l.attribute("data-identity"))
        .collect();
    assert_eq!(lanes, ["25", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]);
    assert!(r.svg.contains("+18 identities not drawn"), "said");
}

/// `requests` requests spread evenly over `identities` identities and `duration_ms`, one
/// in ten allowed, each identity's count climbing to 100; a sample of every key every 20
/// ms (every third one finding no TTL, its value changing each time) and an expiry per key
/// per second: as dense as a history gets.
fn dense_history(requests: u64, identities: u32, duration_ms: u64) -> (Limit, Vec<Event>) {
    let mut limit = limit();
    limit.identities = identities;
    let keys: Vec<String> = (0..identities).map(|i| limit.key(i)).collect();
    let mut events = Vec::with_capacity(usize::try_from(2 * requests).unwrap());
    let (per, spacing_us) = (u64::from(identities), duration_ms * 1000 / requests);
    for id in 0..requests {
        let key = &keys[usize::try_from(id % per).unwrap()];
        let nth = id / per;
        events.push(Event::Invoke {
            id,
            t_us: id * spacing_us,
            identity: u32::try_from(id % per).unwrap(),
            ordinal: nth + 1,
            key: key.clone(),
            phase: 0,
            instance: 0,
        });
        events.push(Event::Complete {
            id,
            t_us: id * spacing_us + 300,
            outcome: if nth % 100 < 10 {
                Outcome::Allowed
            } else {
                Outcome::Rejected
            },
            count: Some(i64::try_from(nth % 100 + 1).unwrap()),
            trips: vec!["EVALSHA".into()],
            keys: vec![key.clone()],
            error: None,
        });
    }
    for t_ms in (0..duration_ms).step_by(20) {
        let pttl_ms = if t_ms % 60 == 0 {
            -1
        } else {
            1000 - i64::try_from(t_ms % 1000).unwrap()
        };
        let value = Some(((t_ms % 1000) / 10).to_string());
        events.push(Event::Sample {
            t_start_us: t_ms * 1000,
            t_end_us: t_ms * 1000 + 500,
            final_audit: false,
            keys: keys
                .iter()
                .map(|k| KeySample {
                    key: k.clone(),
                    pttl_ms,
                    value: value.clone(),
                })
                .collect(),
        });
        if t_ms % 1000 == 0 {
            let expiries = keys.iter().map(|k| Event::Keyspace {
                t_us: t_ms * 1000,
                key: k.clone(),
                event: "expired".into(),
            });
            events.extend(expiries);
        }
    }
    (limit, events)
}

/// Render a dense history (judged by `invariants`), timing the rendering alone.
fn render_dense(limit: &Limit, events: Vec<Event>, invariants: &[Invariant]) -> (String, std::time::Duration) {
    let layout = layout_of(limit);
    let index = HistoryIndex::new(events, &layout);
    let results = crate::checker::check(&crate::checker::CheckInput {
        limit,
        config: &config(invariants),
        algorithm: Algorithm::FixedWindow,
        layout: &layout,
        ttl: &TtlBound::resolve(limit, &config(&[]), Algorithm::FixedWindow, None),
        history: &index,
    });
    let report = report_of(limit, results);
    let limits = TimelineLimits {
        requests_max: limit.requests_max,
        window_ms: limit.window_ms,
        layout: &layout,
    };
    let started = Instant::now();
    let svg = render_timeline(&index, &report, &limits);
    (svg, started.elapsed())
}

#[test]
fn a_burst_of_500000_requests_over_50_identities_renders_small_and_fast() {
    let (limit, events) = dense_history(500_000, 50, 5_000);
    let (svg, took) = render_dense(&limit, events, &[Invariant::TtlPresent]);
    eprintln!("500,000 requests in 5 s: {} bytes in {took:?}", svg.len());
    parse(&svg);
    assert!(svg.len() < 300_000, "{} bytes", svg.len());
    assert!(took.as_secs_f64() < 5.0, "{took:?}");
    assert!(svg.contains("+38 identities not drawn"));
}

#[test]
fn a_long_run_sampled_every_20_ms_stays_within_the_bound() {
    let (limit, events) = dense_history(100_000, 50, 100_000);
    let (svg, took) = render_dense(&limit, events, &[]);
    eprintln!("100 s sampled every 20 ms: {} bytes in {took:?}", svg.len());
    parse(&svg);
    assert!(svg.len() < 300_000, "{} bytes", svg.len());
}

#[test]
fn a_written_timeline_is_linked_from_the_report_and_a_failed_one_is_a_problem() {
    let limit = limit();
    let layout = layout_of(&limit);
    let history = immortal_history(&key);
    let index = HistoryIndex::new(history.events().to_vec(), &layout);
    let limits = TimelineLimits {
        requests_max: limit.requests_max,
        window_ms: limit.window_ms,
        layout: &layout,
    };
    let dir = tempfile::tempdir().unwrap();
    let mut report = report_of(&limit, Vec::new());
    write_timeline(&mut report, &index, &limits, dir.path());
    assert_eq!(report.timeline.as_deref(), Some(TIMELINE_FILE));
    parse(&std::fs::read_to_string(dir.path().join(TIMELINE_FILE)).unwrap());
    assert!(render_markdown(&report).contains("](timeline.svg)"));

    let mut report = report_of(&limit, Vec::new());
    write_timeline(&mut report, &index, &limits, &dir.path().join("missing"));
    assert_eq!(report.timeline, None);
    assert!(
        report.problems[0].starts_with("timeline: cannot write"),
        "{:?}",
        report.problems
    );
    assert!(!render_markdown(&report).contains("timeline.svg)"));
}
