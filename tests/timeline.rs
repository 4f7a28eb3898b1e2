//! The timeline of a real run: incident 1 (`immortal-counter` × `get-then-incr`) on a
//! local `redis-server` writes `timeline.svg` beside its report, with the immortal key
//! marked where tools can find it, and `report.md` links it.

use limiter_harness::report::TIMELINE_FILE;
use limiter_harness_tests::{Kind, run, scenario};

#[tokio::test(flavor = "multi_thread")]
async fn the_immortal_counter_run_draws_its_immortal_key() {
    let (report, dir) = run(scenario("immortal-counter"), "get-then-incr", Kind::Process)
        .await
        .expect("a process backend");
    assert_eq!(report.timeline.as_deref(), Some(TIMELINE_FILE));
    let svg = std::fs::read_to_string(dir.path().join(TIMELINE_FILE)).expect("timeline.svg beside the report");
    let doc = roxmltree::Document::parse(&svg).expect("the timeline is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
    let immortal = doc.descendants().find(|n| {
        n.attribute("class") == Some("anomaly")
            && n.attribute("data-kind") == Some("immortal-key")
            && n.attribute("data-key") == Some("rl:0")
    });
    assert!(immortal.is_some(), "an immortal-key mark for rl:0");
    let no_ttl = doc
        .descendants()
        .any(|n| n.attribute("class") == Some("no-ttl") && n.attribute("data-key") == Some("rl:0"));
    assert!(no_ttl, "rl:0's span without TTL is drawn");
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    assert!(markdown.contains("](timeline.svg)"), "report.md links the timeline");
    eprintln!("timeline.svg: {} bytes", svg.len());
}
