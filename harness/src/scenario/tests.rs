//! Scenario files: a full file resolves to the values written (and the documented defaults),
//! every shipped scenario parses, and each kind of mistake is reported at its line and
//! column with a message that says what is wrong.

use std::path::Path;

use super::{CacheTarget, Fault, GapFaultAction, Invariant, PhaseKind, Scenario, ScenarioError, parse_scenario};

const FULL: &str = r#"name = "full"
about = "  Every table.  "
seed = 42

[server]
maxmemory = "4MB"
maxmemory_policy = "allkeys-lru"

[server.config]
hz = "100"

[cache_server]
maxmemory = "8mb"
maxmemory_policy = "allkeys-lfu"

[limit]
requests_max = 10
window_ms = 1000
identities = 3
key_prefix = "limit:"

[[phase]]
name = "traffic"
kind = "steady"
rate_per_s = 100.5
duration_ms = 2500

[[phase]]
kind = "quiet"
duration_ms = 1200

[[phase]]
name = "import"
kind = "burst"
requests = 500
concurrency = 4
identities = [1, 2]

[[fault]]
kind = "expire-between-round-trips"
identity = 2
request = 12
before_command = "incr"

[[fault]]
kind = "stall-between-round-trips"
stall_ms = 1500
times = 0

[[fault]]
kind = "memory-pressure"
phase = "import"
value_bytes = 2048
target = "cache-server"

[check]
invariants = ["ttl-present", "no-lockout"]
sample_interval_ms = 100
ttl_slack_ms = 5
"#;

/// Only what must be written; everything else takes its default.
const MINIMAL: &str = r#"name = "minimal"

[limit]
requests_max = 10
window_ms = 1000

[[phase]]
kind = "steady"
rate_per_s = 50
duration_ms = 100

[[phase]]
kind = "burst"
requests = 20

[[fault]]
kind = "expire-between-round-trips"

[[fault]]
kind = "memory-pressure"
phase = "burst-2"

[check]
invariants = ["ttl-present"]
"#;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    parse_scenario(Path::new("bad.toml"), text)
}

fn parse_ok(text: &str) -> Scenario {
    parse(text).unwrap_or_else(|e| panic!("should parse:\n{e}"))
}

fn parse_err(text: &str) -> ScenarioError {
    match parse(text) {
        Ok(scenario) => panic!("should fail, parsed {scenario:#?}"),
        Err(e) => e,
    }
}

/// `text` with its one occurrence of `from` replaced by `to`.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "`{from}` must occur once");
    text.replacen(from, to, 1)
}

/// 1-based line and column of the one occurrence of `needle` in `text`.
fn locate(text: &str, needle: &str) -> (usize, usize) {
    assert_eq!(text.matches(needle).count(), 1, "`{needle}` must occur once");
    let offset = text.find(needle).expect("counted above");
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// Line and column of the value on the one line `key = value` of `text`.
fn value_of(text: &str, line: &str) -> (usize, usize) {
    let (key, _) = line.split_once(" = ").expect("a `key = value` line");
    let (row, column) = locate(text, &format!("{line}\n"));
    (row, column + key.len() + " = ".len())
}

/// The error points at `at` and its message contains each of `says`.
fn assert_error_at(err: &ScenarioError, text: &str, at: (usize, usize), says: &[&str]) {
    assert_eq!((err.line, err.column), at, "wrong position for:\n{err}");
    for s in says {
        assert!(err.message.contains(s), "message {:?} lacks {s:?}", err.message);
    }
    let shown = err.to_string();
    let prefix = format!("bad.toml:{}:{}: ", err.line, err.column);
    assert!(shown.starts_with(&prefix), "{shown}");
    let line = text.lines().nth(err.line - 1).expect("the line exists");
    assert!(shown.contains(&format!("{} | {line}", err.line)), "{shown}");
}

fn assert_help_has(err: &ScenarioError, text: &str) {
    let help = err.help.as_deref().unwrap_or_else(|| panic!("no help in:\n{err}"));
    assert!(help.contains(text), "help {help:?} lacks {text:?}");
}

// ---- valid scenarios ---------------------------------------------------------------------

#[test]
fn a_full_scenario_resolves_to_the_values_written() {
    // Long: one assertion per field of the full scenario.
    let s = parse_ok(FULL);
    assert_eq!(s.name, "full");
    assert_eq!(s.about, "Every table.");
    assert_eq!(s.seed, Some(42));
    assert_eq!(s.source, Path::new("bad.toml"));

    let server: Vec<(&str, &str)> = s
        .server
        .settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        server,
        [("hz", "100"), ("maxmemory", "4mb"), ("maxmemory-policy", "allkeys-lru")]
    );
    let cache = s.cache_server.as_ref().expect("[cache_server] given");
    assert_eq!(cache.settings.get("maxmemory").map(String::as_str), Some("8mb"));
    assert_eq!(
        cache.settings.get("maxmemory-policy").map(String::as_str),
        Some("allkeys-lfu")
    );

    assert_eq!(s.limit.requests_max, 10);
    assert_eq!(s.limit.window_ms, 1000);
    assert_eq!(s.limit.identities, 3);
    assert_eq!(s.limit.key(2), "limit:2");

    let names: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["traffic", "quiet-2", "import"],
        "an unnamed phase is named kind-index"
    );
    match &s.phases[0].kind {
        PhaseKind::Steady {
            rate_per_s,
            duration_ms,
            identities,
            ..
        } => {
            assert_eq!(*rate_per_s, 100.5);
            assert_eq!(*duration_ms, 2500);
            assert_eq!(*identities, [0, 1, 2], "all identities by default");
        }
        other => panic!("expected steady, got {other:?}"),
    }
    assert!(matches!(s.phases[1].kind, PhaseKind::Quiet { duration_ms: 1200 }));
    match &s.phases[2].kind {
        PhaseKind::Burst {
            requests,
            concurrency,
            identities,
            ..
        } => assert_eq!((*requests, *concurrency, identities.as_slice()), (500, 4, &[1, 2][..])),
        other => panic!("expected burst, got {other:?}"),
    }

    assert_eq!(s.faults.len(), 3);
    match &s.faults[0] {
        Fault::ExpireBetweenRoundTrips(gap) => {
            assert_eq!(gap.identity, Some(2));
            assert_eq!(gap.request, 12);
            assert_eq!(gap.before_command, ["INCR"], "upper-cased");
            assert_eq!(gap.times, Some(1));
            assert_eq!(gap.action, GapFaultAction::ExpireKey);
        }
        other => panic!("expected expire-between-round-trips, got {other:?}"),
    }
    match &s.faults[1] {
        Fault::StallBetweenRoundTrips(gap) => {
            assert_eq!(gap.identity, None);
            assert_eq!(gap.times, None, "times = 0 strikes every gap");
            assert_eq!(gap.action, GapFaultAction::Stall { stall_ms: 1500 });
        }
        other => panic!("expected stall-between-round-trips, got {other:?}"),
    }
    match &s.faults[2] {
        Fault::MemoryPressure(p) => {
            assert_eq!(p.phase, "import");
            assert_eq!(p.value_bytes, 2048);
            assert_eq!(p.ttl_s, 604_800);
            assert_eq!(p.writes_per_request, 1);
            assert_eq!(p.target, CacheTarget::CacheServer);
        }
        other => panic!("expected memory-pressure, got {other:?}"),
    }

    assert_eq!(s.check.invariants, [Invariant::TtlPresent, Invariant::NoLockout]);
    assert_eq!(s.check.sample_interval_ms, 100);
    assert_eq!(s.check.ttl_slack_ms, 5);
    assert!(s.disrupts_server().iter().any(|r| r.contains("hz 100")));
}

#[test]
fn a_minimal_scenario_takes_the_defaults() {
    let s = parse_ok(MINIMAL);
    assert_eq!(s.about, "");
    assert_eq!(s.seed, None);
    assert!(s.server.settings.is_empty());
    assert!(s.cache_server.is_none());
    assert_eq!(s.limit.identities, 1);
    assert_eq!(s.limit.key_prefix, "rl:");
    assert_eq!(s.limit.key(0), "rl:0");
    let names: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["steady-1", "burst-2"]);
    assert!(matches!(
        &s.phases[1].kind,
        PhaseKind::Burst { requests: 20, concurrency: 1, identities, .. } if identities == &[0]
    ));
    match &s.faults[0] {
        Fault::ExpireBetweenRoundTrips(gap) => {
            assert_eq!(gap.identity, None, "any identity");
            assert_eq!(gap.request, 1);
            assert!(gap.before_command.is_empty());
            assert_eq!(gap.times, Some(1), "a gap fault strikes once by default");
        }
        other => panic!("expected expire-between-round-trips, got {other:?}"),
    }
    match &s.faults[1] {
        Fault::MemoryPressure(p) => {
            assert_eq!((p.value_bytes, p.ttl_s, p.writes_per_request), (1024, 604_800, 1));
            assert_eq!(p.target, CacheTarget::LimiterServer);
        }
        other => panic!("expected memory-pressure, got {other:?}"),
    }
    assert_eq!(s.check.sample_interval_ms, 250, "window_ms / 4, at most 250");
    assert_eq!(s.check.ttl_slack_ms, 0);
}

#[test]
fn the_default_sample_interval_is_a_quarter_window_between_20_and_250_ms() {
    for (window_ms, interval_ms) in [(50, 20), (100, 25), (400, 100), (1000, 250), (20_000, 250)] {
        let text = edit(MINIMAL, "window_ms = 1000", &format!("window_ms = {window_ms}"));
        assert_eq!(
            parse_ok(&text).check.sample_interval_ms,
            interval_ms,
            "window {window_ms}"
        );
    }
}

#[test]
fn every_shipped_scenario_parses() {
    // The checkout's root: above harness/ (or harness/unit/, where these tests build).
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scenarios").is_dir())
        .expect("the checkout's scenarios/ above the package");
    for folder in ["scenarios", "examples/scenarios"] {
        parses_each_in(&root.join(folder));
    }
}

/// Every scenario file in `dir` parses and is named after its file.
fn parses_each_in(dir: &Path) {
    let mut parsed = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the scenarios directory") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let scenario = parse_scenario(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Some(scenario.name.as_str()),
            path.file_stem().and_then(|s| s.to_str()),
            "a scenario is named after its file"
        );
        parsed.push(scenario.name);
    }
    assert!(!parsed.is_empty(), "no scenario found in {}", dir.display());
}

// ---- malformed TOML ----------------------------------------------------------------------

#[test]
fn an_unknown_top_level_field_is_reported_where_it_is_written() {
    let text = edit(MINIMAL, "name = \"minimal\"\n", "name = \"minimal\"\nsed = 3\n");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "sed = 3"),
        &["unknown field `sed`", "`seed`"],
    );
    assert_help_has(&err, "fix its spelling");
}

#[test]
fn an_unknown_field_in_a_phase_is_reported_where_it_is_written() {
    let text = edit(MINIMAL, "rate_per_s = 50", "rate = 50");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "rate = 50"),
        &["unknown field `rate`", "`rate_per_s`"],
    );
    assert_help_has(&err, "fix its spelling");
}

#[test]
fn a_value_of_the_wrong_type_is_reported_at_the_value() {
    let text = edit(MINIMAL, "requests_max = 10", "requests_max = \"10\"");
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "\"10\""), &["invalid type", "string"]);
    assert_help_has(&err, "numbers unquoted");
}

#[test]
fn a_missing_field_says_which() {
    let text = edit(MINIMAL, "requests_max = 10\n", "");
    let err = parse_err(&text);
    assert!(err.message.contains("missing field `requests_max`"), "{err}");
    assert_eq!(err.line, locate(&text, "[limit]").0, "{err}");
    assert_help_has(&err, "add the field");
}

// ---- invalid values ----------------------------------------------------------------------

#[test]
fn a_negative_window_is_reported_at_the_number() {
    let text = edit(MINIMAL, "window_ms = 1000", "window_ms = -1000");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "window_ms = -1000"),
        &["window_ms = -1000 is out of range", "between 50 and 86400000"],
    );
}

#[test]
fn a_zero_limit_is_reported_at_the_number() {
    let text = edit(MINIMAL, "requests_max = 10", "requests_max = 0");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "requests_max = 0"),
        &["requests_max must be a positive whole number"],
    );
    assert_help_has(&err, "requests_max = 1000");
}

#[test]
fn an_unknown_phase_kind_is_reported_at_the_kind() {
    let text = edit(MINIMAL, "kind = \"steady\"", "kind = \"steddy\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"steddy\""),
        &["unknown phase kind `steddy`"],
    );
    assert_help_has(&err, "steady, burst, quiet");
}

#[test]
fn a_field_that_does_not_apply_to_the_phase_kind_is_reported_at_the_field() {
    let text = edit(MINIMAL, "duration_ms = 100", "duration_ms = 100\nrequests = 5");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "requests = 5"),
        &["`requests` does not apply to a steady phase"],
    );
    assert_help_has(&err, "a steady phase takes: name, rate_per_s, duration_ms, identities");

    let text = edit(MINIMAL, "requests = 20", "requests = 20\nduration_ms = 7");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "duration_ms = 7"),
        &["`duration_ms` does not apply to a burst phase"],
    );
}

#[test]
fn a_phase_missing_its_required_field_is_reported_at_its_kind() {
    let text = edit(MINIMAL, "rate_per_s = 50\n", "");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"steady\""),
        &["a steady phase needs `rate_per_s`"],
    );
}

#[test]
fn duplicate_phase_names_are_reported_at_the_second_name() {
    let text = edit(MINIMAL, "kind = \"burst\"", "name = \"steady-1\"\nkind = \"burst\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"steady-1\""),
        &["two phases are named `steady-1`"],
    );
    assert_help_has(&err, "its own name");
}

#[test]
fn a_phase_identity_that_does_not_exist_is_reported() {
    let text = edit(MINIMAL, "requests = 20", "requests = 20\nidentities = [0, 3]");
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "[0, 3]"), &["identity 3 does not exist"]);
    assert_help_has(&err, "numbered 0 to 0");
}

#[test]
fn an_unknown_invariant_is_reported_at_its_name() {
    let text = edit(MINIMAL, "[\"ttl-present\"]", "[\"ttl-present\", \"no-lockup\"]");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"no-lockup\""),
        &["unknown invariant `no-lockup`"],
    );
    assert_help_has(
        &err,
        "ttl-present, ttl-bounded, no-counter-reset, admitted-within-limit, no-lockout",
    );
}

#[test]
fn an_invariant_listed_twice_is_reported_at_the_second() {
    let text = edit(
        MINIMAL,
        "[\"ttl-present\"]",
        "[\"ttl-present\", \"no-lockout\", \"ttl-present\" ]",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"ttl-present\" ]"),
        &["invariant `ttl-present` is listed twice"],
    );
}

#[test]
fn a_fault_naming_an_identity_that_does_not_exist_is_reported_at_the_identity() {
    let text = edit(
        MINIMAL,
        "kind = \"expire-between-round-trips\"",
        "kind = \"expire-between-round-trips\"\nidentity = 4",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "identity = 4"),
        &["identity 4 does not exist"],
    );
    assert_help_has(&err, "numbered 0 to 0");
}

#[test]
fn memory_pressure_naming_a_missing_phase_lists_the_phases() {
    let text = edit(MINIMAL, "phase = \"burst-2\"", "phase = \"import\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"import\""),
        &["no phase is named `import`"],
    );
    assert_help_has(&err, "phases: steady-1, burst-2");
}

#[test]
fn memory_pressure_during_a_quiet_phase_is_reported() {
    let text = edit(
        MINIMAL,
        "kind = \"burst\"\nrequests = 20",
        "kind = \"quiet\"\nduration_ms = 20",
    );
    let text = edit(&text, "phase = \"burst-2\"", "phase = \"quiet-2\"");
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "\"quiet-2\""), &["phase `quiet-2` is quiet"]);
}

#[test]
fn a_cache_server_target_needs_a_cache_server_table() {
    let text = edit(
        MINIMAL,
        "phase = \"burst-2\"",
        "phase = \"burst-2\"\ntarget = \"cache-server\"",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"cache-server\""),
        &["target = \"cache-server\" needs a [cache_server] table"],
    );
    assert_help_has(&err, "add [cache_server]");
}

#[test]
fn a_reserved_server_parameter_is_refused() {
    let text = edit(
        MINIMAL,
        "[limit]",
        "[server.config]\nnotify-keyspace-events = \"KEA\"\n\n[limit]",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "notify-keyspace-events"),
        &["`notify-keyspace-events` is set by the harness itself"],
    );
    assert_help_has(&err, "remove it from [server.config]");
}

#[test]
fn maxmemory_in_server_config_points_to_the_server_field() {
    let text = edit(
        MINIMAL,
        "[limit]",
        "[server.config]\nmaxmemory-policy = \"allkeys-lru\"\n\n[limit]",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "maxmemory-policy"),
        &["set `maxmemory-policy` with the `maxmemory_policy` field of [server]"],
    );
}

#[test]
fn an_unknown_eviction_policy_is_reported_with_the_choices() {
    let text = edit(FULL, "\"allkeys-lru\"", "\"allkeys-lru2\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"allkeys-lru2\""),
        &["unknown maxmemory_policy `allkeys-lru2`"],
    );
    assert_help_has(&err, "noeviction");
}

#[test]
fn a_memory_size_redis_does_not_understand_is_reported() {
    let text = edit(FULL, "\"4MB\"", "\"4 megabytes\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"4 megabytes\""),
        &["is not a memory size Redis understands"],
    );
}

#[test]
fn a_key_prefix_with_glob_characters_is_refused() {
    let text = edit(FULL, "\"limit:\"", "\"limit:*\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"limit:*\""),
        &["key_prefix must be non-empty"],
    );
    assert_help_has(&err, "SCAN MATCH");
}

#[test]
fn a_scenario_without_phases_is_refused() {
    let text = edit(
        MINIMAL,
        "[[phase]]\nkind = \"steady\"\nrate_per_s = 50\nduration_ms = 100\n",
        "",
    );
    let text = edit(&text, "[[phase]]\nkind = \"burst\"\nrequests = 20\n", "");
    let text = edit(
        &text,
        "[[fault]]\nkind = \"memory-pressure\"\nphase = \"burst-2\"\n",
        "",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"minimal\""),
        &["the scenario has no [[phase]]"],
    );
}

#[test]
fn errors_count_columns_in_characters() {
    let text = edit(MINIMAL, "[\"ttl-present\"]", "[\"ttl-présent\"]");
    let err = parse_err(&text);
    assert_eq!(err.line, locate(&text, "\"ttl-présent\"").0);
    assert_eq!(err.column, "invariants = [".chars().count() + 1, "{err}");
}

// ---- the limiter's keys, TTL bounds, planted commands, rescaling --------------------------

fn with_keys(keys: &str) -> String {
    edit(
        MINIMAL,
        "window_ms = 1000\n",
        &format!("window_ms = 1000\nidentities = 2\nkeys = {keys}\n"),
    )
}

#[test]
fn keys_describe_the_limiters_layout() {
    let s = parse_ok(&with_keys(r#"["geocode:calls:{identity}:*", "b.{{{identity}}}.ts"]"#));
    let layout = s.limit.keys.expect("keys given");
    assert_eq!(layout.identity_of(b"geocode:calls:1:20261201"), Some(1));
    assert_eq!(layout.identity_of(b"b.{0}.ts"), Some(0));
    assert_eq!(layout.identity_of(b"geocode:calls:2:x"), None, "identities are 0 and 1");
    assert!(
        parse_ok(MINIMAL).limit.keys.is_none(),
        "absent: the limiter's or the default"
    );
}

#[test]
fn a_bad_key_template_is_reported_at_the_template() {
    let text = with_keys(r#"["ok:{identity}", "bad:{id}"]"#);
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"bad:{id}\""),
        &["unknown placeholder {id}"],
    );
    assert_help_has(&err, "{identity} where the identity's number goes");
    let text = with_keys(r#"["no-identity"]"#);
    assert_error_at(
        &parse_err(&text),
        &text,
        locate(&text, "\"no-identity\""),
        &["exactly once"],
    );
    let text = with_keys("[]");
    assert_error_at(&parse_err(&text), &text, value_of(&text, "keys = []"), &["empty"]);
}

#[test]
fn ttl_max_ms_is_read_and_checked() {
    let text = edit(
        MINIMAL,
        "invariants = [\"ttl-present\"]\n",
        "invariants = [\"ttl-present\"]\nttl_max_ms = 2000\n",
    );
    assert_eq!(parse_ok(&text).check.ttl_max_ms, Some(2000));
    let bad = edit(&text, "ttl_max_ms = 2000", "ttl_max_ms = 0");
    assert_error_at(
        &parse_err(&bad),
        &bad,
        value_of(&bad, "ttl_max_ms = 0"),
        &["out of range"],
    );
}

#[test]
fn a_commands_setup_is_parsed_with_its_placeholders() {
    let setup = "[[setup]]\nkind = \"commands\"\nidentity = 1\ncommands = [\"SET app:{identity}:n 99\", \"PERSIST {key}\"]\n\n[check]";
    let text = edit(&with_keys(r#"["app:{identity}:n"]"#), "[check]", setup);
    let s = parse_ok(&text);
    assert_eq!(
        s.setup,
        vec![super::Setup::Commands {
            identity: 1,
            commands: vec![
                vec!["SET".into(), "app:{identity}:n".into(), "99".into()],
                vec!["PERSIST".into(), "{key}".into()]
            ],
        }]
    );
    let bad = edit(&text, "PERSIST {key}", "PERSIST {now}");
    assert_error_at(
        &parse_err(&bad),
        &bad,
        locate(&bad, "\"PERSIST {now}\""),
        &["unknown placeholder `{now}`"],
    );
    let missing = edit(
        &text,
        "commands = [\"SET app:{identity}:n 99\", \"PERSIST {key}\"]\n",
        "",
    );
    assert_error_at(
        &parse_err(&missing),
        &missing,
        locate(&missing, "\"commands\""),
        &["needs `commands`"],
    );
}

#[test]
fn rescaling_the_window_keeps_the_scenarios_shape() {
    let mut s = parse_ok(FULL);
    s.rescale_window(2000).unwrap();
    assert_eq!(s.limit.window_ms, 2000);
    match &s.phases[0].kind {
        PhaseKind::Steady {
            rate_per_s,
            duration_ms,
            ..
        } => assert_eq!((*rate_per_s, *duration_ms), (50.25, 5000)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(s.phases[1].kind, PhaseKind::Quiet { duration_ms: 2400 }));
    assert!(
        matches!(s.phases[2].kind, PhaseKind::Burst { requests: 500, .. }),
        "bursts are closed loop"
    );
    assert!(matches!(
        &s.faults[1],
        Fault::StallBetweenRoundTrips(g) if g.action == GapFaultAction::Stall { stall_ms: 3000 }
    ));
    assert_eq!((s.check.sample_interval_ms, s.check.ttl_slack_ms), (200, 10));
    let same = crate::workload::plan(&parse_ok(FULL), 1).total_requests();
    assert_eq!(crate::workload::plan(&s, 1).total_requests(), same, "the same requests");
    let mut huge = parse_ok(FULL);
    let err = huge.rescale_window(86_400_000).unwrap_err().to_string();
    assert!(
        err.contains("phase `traffic` would be") && err.contains("at most 3600000"),
        "{err}"
    );
    assert_eq!(huge.limit.window_ms, 1000, "refused: unchanged");
}

#[test]
fn a_clock_skew_without_instance_skews_the_first_as_documented() {
    use crate::scenario::ClockSkew;
    let text = edit(
        MINIMAL,
        "[check]\ninvariants = [\"ttl-present\"]",
        "[[fault]]\nkind = \"clock-skew\"\noffset_ms = 2000\n\n[check]\ninvariants = [\"ttl-present\"]",
    );
    let skew = parse_ok(&text).faults.iter().find_map(|f| match f {
        Fault::ClockSkew(c) => Some(*c),
        _ => None,
    });
    assert_eq!(
        skew,
        Some(ClockSkew {
            instance: 0,
            offset_ms: 2000,
            drift_ms_per_s: 0.0
        })
    );
}

#[test]
fn rescaling_the_window_moves_server_faults_and_skewed_clocks_with_it() {
    use crate::scenario::{ClockSkew, ServerAction};
    let with = |lose_writes_ms: u64| {
        let text = edit(
            &edit(MINIMAL, "window_ms = 1000", "window_ms = 1000\ninstances = 2"),
            "[check]\ninvariants = [\"ttl-present\"]",
            &format!(
                "[[fault]]\nkind = \"server-pause\"\nphase = \"steady-1\"\nafter_ms = 60\npause_ms = 3000\n\n\
                 [[fault]]\nkind = \"failover\"\nphase = \"burst-2\"\nlose_writes_ms = {lose_writes_ms}\n\n\
                 [[fault]]\nkind = \"clock-skew\"\ninstance = 1\noffset_ms = -1500\ndrift_ms_per_s = 50\n\n\
                 [check]\ninvariants = [\"ttl-present\"]\ndeadline_ms = 30000"
            ),
        );
        let mut s = parse_ok(&text);
        s.rescale_window(2000).unwrap();
        s
    };
    let s = with(500);
    let servers: Vec<_> = s.faults.iter().filter_map(|f| f.server()).collect();
    // 60 ms into the 100 ms phase stays 60 % into it (now 200 ms), for as many windows.
    assert_eq!(servers[0].after_ms, 120);
    assert_eq!(servers[0].action, ServerAction::Pause { pause_ms: 6000 });
    assert_eq!(servers[1].after_ms, 0, "at the phase's start stays there");
    assert!(matches!(
        servers[1].action,
        ServerAction::Failover {
            lose_writes_ms: 1000,
            ..
        }
    ));
    let skew = s.faults.iter().find_map(|f| match f {
        Fault::ClockSkew(c) => Some(*c),
        _ => None,
    });
    assert_eq!(
        skew,
        Some(ClockSkew {
            instance: 1,
            offset_ms: -3000,
            drift_ms_per_s: 50.0
        }),
        "as many windows behind; a drift is a ratio"
    );
    assert_eq!(s.check.deadline_ms, Some(60_000));
    let clean = with(0);
    assert!(
        clean
            .faults
            .iter()
            .filter_map(|f| f.server())
            .any(|f| matches!(f.action, ServerAction::Failover { lose_writes_ms: 0, .. })),
        "a clean failover stays clean"
    );
}

// ---- bounds ------------------------------------------------------------------------------

#[test]
fn a_scenario_planning_more_requests_than_the_cap_says_the_cap_and_the_figure() {
    let huge_rate = edit(
        &edit(MINIMAL, "rate_per_s = 50", "rate_per_s = 1000000"),
        "duration_ms = 100\n\n[[phase]]\nkind = \"burst\"",
        "duration_ms = 3600000\n\n[[phase]]\nkind = \"burst\"",
    );
    let err = parse_err(&huge_rate);
    assert_error_at(
        &err,
        &huge_rate,
        value_of(&huge_rate, "rate_per_s = 1000000"),
        &["3600000000 requests", "at most 1000000"],
    );
    assert_help_has(&err, "memory");
    let huge_burst = edit(MINIMAL, "requests = 20", "requests = 100000000");
    let err = parse_err(&huge_burst);
    assert_error_at(
        &err,
        &huge_burst,
        value_of(&huge_burst, "requests = 100000000"),
        &["100000005 requests", "phase `burst-2`", "at most 1000000"],
    );
    let at_cap = edit(MINIMAL, "requests = 20", "requests = 999995");
    assert_eq!(
        parse_ok(&at_cap)
            .phases
            .iter()
            .map(|p| p.kind.planned_requests())
            .sum::<u64>(),
        1_000_000
    );
}

#[test]
fn the_longest_hold_up_is_the_longest_one_strike_of_any_fault() {
    assert_eq!(parse_ok(MINIMAL).hold_up_ms_max(), 0, "no fault holds anything up");
    // FULL: a 1500 ms stall on every gap; one strike holds a request up 1500 ms.
    assert_eq!(parse_ok(FULL).hold_up_ms_max(), 1_500);
    let with_pause = |pause_ms: u64| {
        edit(
            MINIMAL,
            "[check]",
            &format!(
                "[[fault]]\nkind = \"server-pause\"\nphase = \"burst-2\"\nafter_ms = 0\npause_ms = {pause_ms}\n\n[check]"
            ),
        )
    };
    assert_eq!(parse_ok(&with_pause(9_000)).hold_up_ms_max(), 9_000);
    assert_eq!(parse_ok(&with_pause(90)).hold_up_ms_max(), 90);
}

#[test]
fn the_deadline_is_derived_from_phases_and_faults_unless_the_scenario_sets_it() {
    // A minute and twice the worst case: the 100 ms steady phase, 5 ms for each of the 20
    // burst requests.
    assert_eq!(parse_ok(MINIMAL).worst_case_ms(), 100 + 100);
    assert_eq!(parse_ok(MINIMAL).deadline().as_millis(), 60_000 + 200 + 200);
    // FULL: 2 × (2500 + 1200) ms, 500 burst requests, and a 1500 ms stall on every gap: at
    // most every one of its 751 requests (251 steady, 500 burst), twice.
    assert_eq!(
        parse_ok(FULL).deadline().as_millis(),
        60_000 + 7_400 + 5_000 + 1_500 * 751 * 2
    );
    let set = edit(
        MINIMAL,
        "invariants = [\"ttl-present\"]",
        "invariants = [\"ttl-present\"]\ndeadline_ms = 1500",
    );
    assert_eq!(parse_ok(&set).deadline().as_millis(), 1500);
    let zero = edit(
        MINIMAL,
        "invariants = [\"ttl-present\"]",
        "invariants = [\"ttl-present\"]\ndeadline_ms = 0",
    );
    assert_error_at(
        &parse_err(&zero),
        &zero,
        value_of(&zero, "deadline_ms = 0"),
        &["deadline_ms"],
    );
}

#[test]
fn server_faults_resolve_with_their_moment_and_defaults() {
    use crate::scenario::{Persistence, ServerAction, ServerErrorPolicy};
    let text = edit(
        MINIMAL,
        "[check]\ninvariants = [\"ttl-present\"]",
        "[[fault]]\nkind = \"server-restart\"\nphase = \"burst-2\"\nafter_ms = 40\npersistence = \"aof\"\n\n\
         [[fault]]\nkind = \"server-pause\"\nphase = \"steady-1\"\npause_ms = 3000\n\n\
         [[fault]]\nkind = \"script-flush\"\nphase = \"steady-1\"\n\n\
         [[fault]]\nkind = \"client-kill\"\nphase = \"burst-2\"\nafter_ms = 5\n\n\
         [check]\ninvariants = [\"fails-as-declared\"]\non_server_error = \"fail-open\"",
    );
    let s = parse_ok(&text);
    let servers: Vec<_> = s.faults.iter().filter_map(|f| f.server()).collect();
    assert_eq!(servers.len(), 4);
    assert_eq!((servers[0].phase.as_str(), servers[0].after_ms), ("burst-2", 40));
    assert_eq!(
        servers[0].action,
        ServerAction::Restart {
            persistence: Persistence::Aof
        }
    );
    assert_eq!(servers[1].action, ServerAction::Pause { pause_ms: 3000 });
    assert_eq!(servers[1].after_ms, 0);
    assert_eq!(servers[2].action, ServerAction::ScriptFlush);
    assert_eq!(servers[3].action, ServerAction::ClientKill);
    assert_eq!(s.check.on_server_error, ServerErrorPolicy::FailOpen);
    assert!(s.keeps_aof());
    assert!(s.disrupts_server().iter().any(|r| r.contains("server-restart")));
    // The pause and the restart each may hold traffic up: the deadline allows for them.
    assert!(s.deadline() > parse_ok(MINIMAL).deadline() + std::time::Duration::from_secs(16));
}

#[test]
fn a_bad_server_fault_is_reported_where_it_is_written() {
    let fault = |body: &str| {
        edit(
            MINIMAL,
            "[check]\ninvariants = [\"ttl-present\"]",
            &format!("[[fault]]\n{body}\n\n[check]\ninvariants = [\"ttl-present\"]"),
        )
    };
    let no_phase = fault("kind = \"server-restart\"");
    assert_error_at(
        &parse_err(&no_phase),
        &no_phase,
        value_of(&no_phase, "kind = \"server-restart\""),
        &["needs `phase`"],
    );
    let unknown_phase = fault("kind = \"script-flush\"\nphase = \"nope\"");
    let err = parse_err(&unknown_phase);
    assert_error_at(
        &err,
        &unknown_phase,
        value_of(&unknown_phase, "phase = \"nope\""),
        &["no phase is named `nope`"],
    );
    assert_help_has(&err, "steady-1");
    let persistence = fault("kind = \"server-restart\"\nphase = \"burst-2\"\npersistence = \"rdb\"");
    let err = parse_err(&persistence);
    assert_error_at(
        &err,
        &persistence,
        value_of(&persistence, "persistence = \"rdb\""),
        &["unknown persistence"],
    );
    assert_help_has(&err, "aof");
    let no_pause = fault("kind = \"server-pause\"\nphase = \"burst-2\"");
    assert_error_at(
        &parse_err(&no_pause),
        &no_pause,
        value_of(&no_pause, "kind = \"server-pause\""),
        &["needs `pause_ms`"],
    );
    let stray = fault("kind = \"client-kill\"\nphase = \"burst-2\"\npause_ms = 10");
    assert_error_at(
        &parse_err(&stray),
        &stray,
        value_of(&stray, "pause_ms = 10"),
        &["pause_ms"],
    );
    let policy = edit(
        MINIMAL,
        "invariants = [\"ttl-present\"]",
        "invariants = [\"ttl-present\"]\non_server_error = \"shrug\"",
    );
    let err = parse_err(&policy);
    assert_error_at(
        &err,
        &policy,
        value_of(&policy, "on_server_error = \"shrug\""),
        &["unknown on_server_error"],
    );
    assert_help_has(&err, "fail-closed");
}

#[test]
fn a_failover_fault_resolves_its_hold_and_connections_and_points_at_a_bad_value() {
    use crate::scenario::{FailoverConnections, ServerAction};
    let fault = |body: &str| {
        edit(
            MINIMAL,
            "[check]\ninvariants = [\"ttl-present\"]",
            &format!(
                "[[fault]]\nkind = \"failover\"\nphase = \"steady-1\"\n{body}\n\n[check]\ninvariants = [\"recovers-after-fault\"]"
            ),
        )
    };
    let s = parse_ok(&fault("after_ms = 100\nlose_writes_ms = 500\nconnections = \"move\""));
    assert!(s.needs_replica());
    assert_eq!(
        s.faults.iter().find_map(|f| f.server()).unwrap().action,
        ServerAction::Failover {
            lose_writes_ms: 500,
            connections: FailoverConnections::Move
        }
    );
    let defaults = parse_ok(&fault(""));
    assert_eq!(
        defaults.faults.iter().find_map(|f| f.server()).unwrap().action,
        ServerAction::Failover {
            lose_writes_ms: 0,
            connections: FailoverConnections::Stay
        }
    );
    assert!(!parse_ok(MINIMAL).needs_replica());
    let bad = fault("connections = \"sideways\"");
    assert_error_at(
        &parse_err(&bad),
        &bad,
        value_of(&bad, "connections = \"sideways\""),
        &["unknown connections"],
    );
    let misplaced = fault("pause_ms = 10");
    assert_error_at(
        &parse_err(&misplaced),
        &misplaced,
        value_of(&misplaced, "pause_ms = 10"),
        &["pause_ms"],
    );
}

#[test]
fn clear_of_expiry_is_a_steady_phase_margin_off_by_default() {
    let steady = |s: &Scenario| match &s.phases[0].kind {
        PhaseKind::Steady { clear_of_expiry_ms, .. } => *clear_of_expiry_ms,
        other => panic!("{other:?}"),
    };
    assert_eq!(steady(&parse_ok(FULL)), 0);
    let on = edit(
        FULL,
        "duration_ms = 2500",
        "duration_ms = 2500\nclear_of_expiry_ms = 40",
    );
    assert_eq!(steady(&parse_ok(&on)), 40);
    let burst = edit(FULL, "requests = 500", "requests = 500\nclear_of_expiry_ms = 40");
    let err = parse_err(&burst);
    assert!(
        err.message
            .contains("`clear_of_expiry_ms` does not apply to a burst phase"),
        "{err}"
    );
    let big = edit(
        FULL,
        "duration_ms = 2500",
        "duration_ms = 2500\nclear_of_expiry_ms = 70000",
    );
    assert!(parse_err(&big).message.contains("clear_of_expiry_ms"), "out of range");
}

// ---- topology ------------------------------------------------------------------------------

/// MINIMAL without its faults, with `server` as its [server] table.
fn on_server(server: &str) -> String {
    let text = edit(
        MINIMAL,
        "[[fault]]\nkind = \"expire-between-round-trips\"\n\n[[fault]]\nkind = \"memory-pressure\"\nphase = \"burst-2\"\n\n",
        "",
    );
    edit(&text, "[limit]", &format!("[server]\n{server}\n\n[limit]"))
}

#[test]
fn a_cluster_topology_resolves_with_its_defaults_and_one_server_is_the_default() {
    use super::Topology;
    assert_eq!(parse_ok(MINIMAL).server.topology, Topology::Single);
    assert_eq!(
        parse_ok(&on_server("topology = \"single\"")).server.topology,
        Topology::Single
    );
    assert_eq!(
        parse_ok(&on_server("topology = \"cluster\"")).server.topology,
        Topology::Cluster {
            primaries: 3,
            replicas: 0
        }
    );
    let s = parse_ok(&on_server("topology = \"cluster\"\nprimaries = 5\nreplicas = 1"));
    assert_eq!(
        s.server.topology,
        Topology::Cluster {
            primaries: 5,
            replicas: 1
        }
    );
    let report = serde_json::to_value(&s.server).unwrap();
    assert_eq!(report["topology"]["kind"], "cluster");
    let single = serde_json::to_value(&parse_ok(MINIMAL).server).unwrap();
    assert!(
        single.get("topology").is_none(),
        "one server's report stays as it was: {single}"
    );
}

#[test]
fn a_bad_topology_is_reported_where_it_is_written() {
    let text = on_server("topology = \"sharded\"");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"sharded\""),
        &["unknown topology `sharded`"],
    );
    assert_help_has(&err, "single, cluster");

    let text = on_server("primaries = 3");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "primaries = 3"),
        &["`primaries` is a cluster's"],
    );
    assert_help_has(&err, "topology = \"cluster\"");

    let text = on_server("topology = \"cluster\"\nprimaries = 10");
    let err = parse_err(&text);
    assert_error_at(&err, &text, value_of(&text, "primaries = 10"), &["between 1 and 9"]);

    let text = on_server("topology = \"cluster\"\nreplicas = 3");
    let err = parse_err(&text);
    assert_error_at(&err, &text, value_of(&text, "replicas = 3"), &["between 0 and 2"]);

    let text = edit(
        &on_server("maxmemory_policy = \"noeviction\""),
        "[limit]",
        "[cache_server]\ntopology = \"cluster\"\n\n[limit]",
    );
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"cluster\""),
        &["only the limiter's [server]"],
    );
}

#[test]
fn a_fault_that_does_not_run_on_a_cluster_yet_is_refused_at_its_kind() {
    let text = edit(MINIMAL, "[limit]", "[server]\ntopology = \"cluster\"\n\n[limit]");
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"memory-pressure\""),
        &["fault `memory-pressure` does not run on topology = \"cluster\" yet"],
    );
    assert_help_has(&err, "clock-skew");
    assert_help_has(&err, "expire-, stall- and client-dies-between-round-trips");
    // The faults between round trips run there: the nemesis reaches the key on its node.
    let gap =
        on_server("topology = \"cluster\"") + "\n[[fault]]\nkind = \"expire-between-round-trips\"\nidentity = 0\n";
    assert!(matches!(
        &parse_ok(&gap).faults[0],
        super::Fault::ExpireBetweenRoundTrips(_)
    ));
    let skewed =
        on_server("topology = \"cluster\"") + "\n[[fault]]\nkind = \"clock-skew\"\ninstance = 0\noffset_ms = 100\n";
    assert!(parse_ok(&skewed).server.topology.is_cluster());
    // A fault on a command's reply runs there (a fault proxy per node), a cluster's errors too.
    let injected = on_server("topology = \"cluster\"")
        + "\n[[fault]]\nkind = \"inject-error\"\nidentity = 0\nerror = \"clusterdown\"\n";
    let s = parse_ok(&injected);
    assert!(
        matches!(&s.faults[0], super::Fault::OnCommand(f)
            if f.action == super::CommandFaultAction::InjectError { error: "CLUSTERDOWN The cluster is down".into() }),
        "{:?}",
        s.faults
    );
}

#[test]
fn a_reshard_resolves_on_a_cluster_with_its_defaults_and_is_refused_on_one_server() {
    use super::{ServerAction, Topology};
    let fault = "\n[[fault]]\nkind = \"reshard\"\nphase = \"steady-1\"\nafter_ms = 50\n";
    let s = parse_ok(&(on_server("topology = \"cluster\"\nprimaries = 2") + fault));
    assert_eq!(
        s.server.topology,
        Topology::Cluster {
            primaries: 2,
            replicas: 0
        }
    );
    let reshard = s.faults[0].server().expect("a server fault");
    assert_eq!(
        reshard.action,
        ServerAction::Reshard {
            identity: 0,
            migrating_ms: 200,
            atomic: false
        }
    );
    // Valkey's atomic slot migration: no slot held migrating, so no `migrating_ms`.
    let atomic = parse_ok(&(on_server("topology = \"cluster\"") + fault + "method = \"atomic\"\n"));
    assert_eq!(
        atomic.faults[0].server().expect("a server fault").action,
        ServerAction::Reshard {
            identity: 0,
            migrating_ms: 0,
            atomic: true
        }
    );
    let text = on_server("topology = \"cluster\"") + fault + "method = \"atomic\"\nmigrating_ms = 100\n";
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        value_of(&text, "migrating_ms = 100"),
        &["holds no slot migrating"],
    );
    let text = on_server("topology = \"cluster\"") + fault + "method = \"swift\"\n";
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "\"swift\""), &["unknown method `swift`"]);
    assert_help_has(&err, "CLUSTER MIGRATESLOTS");
    let text = on_server("maxmemory_policy = \"noeviction\"") + fault;
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"reshard\""),
        &["moves a slot between a cluster's primaries"],
    );
    assert_help_has(&err, "topology = \"cluster\"");
    let text = on_server("topology = \"cluster\"\nprimaries = 1") + fault;
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "\"reshard\""), &["this cluster has one"]);
    let text =
        on_server("topology = \"cluster\"") + fault.replace("reshard", "script-flush").as_str() + "migrating_ms = 5\n";
    let err = parse_err(&text);
    assert!(err.message.contains("`migrating_ms` does not apply"), "{err}");
}

#[test]
fn a_node_failover_resolves_on_a_cluster_with_replicas_and_is_refused_elsewhere() {
    use super::ServerAction;
    let fault = "\n[[fault]]\nkind = \"node-failover\"\nphase = \"steady-1\"\nafter_ms = 50\nlose_writes_ms = 300\n";
    let s = parse_ok(&(on_server("topology = \"cluster\"\nreplicas = 1") + fault));
    assert_eq!(
        s.faults[0].server().expect("a server fault").action,
        ServerAction::NodeFailover {
            identity: 0,
            lose_writes_ms: 300
        }
    );
    assert!(s.holds_replication());
    let clean =
        parse_ok(&(on_server("topology = \"cluster\"\nreplicas = 1") + &fault.replace("lose_writes_ms = 300\n", "")));
    assert!(!clean.holds_replication(), "a clean failover holds nothing");
    let text = on_server("topology = \"cluster\"") + fault;
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"node-failover\""),
        &["this cluster has none"],
    );
    assert_help_has(&err, "replicas = 1");
    let text = on_server("maxmemory_policy = \"noeviction\"") + fault;
    let err = parse_err(&text);
    assert_error_at(
        &err,
        &text,
        locate(&text, "\"node-failover\""),
        &["promotes a cluster primary's replica"],
    );
    let text = on_server("topology = \"cluster\"\nreplicas = 1") + fault + "connections = \"move\"\n";
    assert!(
        parse_err(&text).message.contains("`connections` does not apply"),
        "{}",
        parse_err(&text)
    );
}

#[test]
fn a_node_pause_resolves_on_a_cluster_needs_its_length_and_is_refused_on_one_server() {
    use super::ServerAction;
    let fault =
        "\n[[fault]]\nkind = \"node-pause\"\nphase = \"steady-1\"\nafter_ms = 50\nidentity = 1\npause_ms = 4000\n";
    let two = on_server("topology = \"cluster\"").replace("window_ms = 1000", "window_ms = 1000\nidentities = 2");
    let s = parse_ok(&(two + fault));
    assert_eq!(
        s.faults[0].server().expect("a server fault").action,
        ServerAction::NodePause {
            identity: 1,
            pause_ms: 4000
        }
    );
    assert!(!s.holds_replication(), "a pause holds no replication");
    assert!(s.faults[0].kind().fails_over(), "its replica may be promoted meanwhile");
    let fault = fault.replace("identity = 1\n", "");
    let text = on_server("topology = \"cluster\"") + &fault.replace("pause_ms = 4000\n", "");
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "\"node-pause\""), &["needs `pause_ms`"]);
    assert_help_has(&err, "node timeout");
    let text = on_server("maxmemory_policy = \"noeviction\"") + &fault;
    let err = parse_err(&text);
    assert_error_at(&err, &text, locate(&text, "\"node-pause\""), &["stops a cluster node"]);
    assert_help_has(&err, "topology = \"cluster\"");
    let text = on_server("topology = \"cluster\"") + &fault + "lose_writes_ms = 10\n";
    assert!(
        parse_err(&text).message.contains("`lose_writes_ms` does not apply"),
        "{}",
        parse_err(&text)
    );
}
