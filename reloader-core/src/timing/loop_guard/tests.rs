use super::*;

const MINUTE: Duration = Duration::from_secs(60);

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn seconds_after(start: Timestamp, seconds: i64) -> Timestamp {
    start + SignedDuration::from_secs(seconds)
}

#[test]
fn the_flag_parses_and_prints() {
    let guard = |max_reloads, within| Some(LoopGuard { max_reloads, within });
    let cases = [
        ("20/10m", guard(20, 10 * MINUTE), "20/10m"),
        (" 5/30s ", guard(5, Duration::from_secs(30)), "5/30s"),
        ("2/1h30m", guard(2, 90 * MINUTE), "2/1h30m"),
        ("3/90s", guard(3, Duration::from_secs(90)), "3/1m30s"),
        ("4/1.5s", guard(4, Duration::from_millis(1_500)), "4/1.5s"),
        ("6/3600s", guard(6, 60 * MINUTE), "6/1h"),
        ("off", None, ""),
        ("OFF", None, ""),
    ];
    for (text, expected, printed) in cases {
        assert_eq!(LoopGuard::parse(text), Ok(expected), "{text}");
        if let Some(guard) = expected {
            assert_eq!(guard.to_string(), printed, "{text}");
            assert_eq!(LoopGuard::parse(printed), Ok(Some(guard)), "round trip of {text}");
        }
    }
    assert_eq!(LoopGuard::DEFAULT.to_string(), "20/10m");
    assert_eq!(LoopGuard::parse(&LoopGuard::default().to_string()), Ok(Some(LoopGuard::DEFAULT)));
}

#[test]
fn bad_flags_say_why() {
    let at_least_2 = "expected a whole number, at least 2";
    let cases = [
        ("1/10m", format!("reloads \"1\": {at_least_2}")),
        ("0/10m", format!("reloads \"0\": {at_least_2}")),
        ("-3/10m", format!("reloads \"-3\": {at_least_2}")),
        ("/10m", format!("reloads \"\": {at_least_2}")),
        ("20", "missing '/'".to_owned()),
        ("on", "missing '/'".to_owned()),
        ("20/0s", "the duration must be longer than 0".to_owned()),
        ("20/10", "missing unit in duration \"10\"".to_owned()),
        ("20/-1m", "negative duration \"-1m\"".to_owned()),
    ];
    for (text, reason) in cases {
        let error = LoopGuard::parse(text).unwrap_err();
        assert_eq!(error, LoopGuardError { text: text.to_owned(), reason }, "{text}");
    }
    assert_eq!(
        LoopGuard::parse("1/10m").unwrap_err().to_string(),
        r#"invalid loop guard "1/10m": reloads "1": expected a whole number, at least 2 (expected <reloads>/<duration> such as 20/10m, or off)"#
    );
}

#[test]
fn the_reload_past_the_limit_within_the_window_trips() {
    let guard = LoopGuard::DEFAULT;
    let start = at("2026-01-05T10:00:00Z");
    let mut history = ReloadHistory::default();
    // 20 reloads in 9 minutes are allowed.
    for i in 0..20 {
        let reload = seconds_after(start, i * 27);
        assert_eq!(history.allows(&guard, reload), Verdict::Allow, "reload {}", i + 1);
        history.record(&guard, reload);
    }
    // The 21st within 10 minutes of the first trips (before its write: not recorded).
    let trip = Verdict::Trip { reloads: 20, within: 10 * MINUTE };
    let cases = [(540, trip), (599, trip), (600, Verdict::Allow), (627, Verdict::Allow)];
    for (seconds, verdict) in cases {
        assert_eq!(history.allows(&guard, seconds_after(start, seconds)), verdict, "at +{seconds}s");
    }
    assert_eq!(history.last(), Some(seconds_after(start, 19 * 27)));
}

#[test]
fn spaced_reloads_never_trip_and_the_history_stays_bounded() {
    let guard = LoopGuard { max_reloads: 20, within: 10 * MINUTE };
    let start = at("2026-01-05T10:00:00Z");
    for spacing in [30, 31, 600] {
        let mut history = ReloadHistory::default();
        for i in 0..500 {
            let reload = seconds_after(start, i * spacing);
            assert_eq!(history.allows(&guard, reload), Verdict::Allow, "every {spacing}s, reload {i}");
            history.record(&guard, reload);
            assert!(history.reloads.len() <= 20);
        }
    }
    // Recording past a trip (a reload forced through) keeps the bound too.
    let mut history = ReloadHistory::default();
    for i in 0..100 {
        history.record(&guard, seconds_after(start, i));
        assert!(history.reloads.len() <= 20);
    }
    assert_eq!(
        history.allows(&guard, seconds_after(start, 100)),
        Verdict::Trip { reloads: 20, within: 10 * MINUTE }
    );
}

#[test]
fn a_history_is_idle_once_its_last_reload_leaves_the_window() {
    let guard = LoopGuard::DEFAULT;
    let reload = at("2026-01-05T10:00:00Z");
    let mut history = ReloadHistory::default();
    assert!(history.is_idle(&guard, reload) && history.last().is_none());
    history.record(&guard, reload);
    assert!(!history.is_idle(&guard, seconds_after(reload, 599)));
    assert!(history.is_idle(&guard, seconds_after(reload, 600)));
}

#[test]
fn the_stop_record_round_trips_and_a_bad_one_is_a_problem() {
    let stop = LoopStop {
        at: at("2026-01-05T10:00:00Z"),
        reloads: 20,
        within: 10 * MINUTE,
        resource: "ConfigMap/app".to_owned(),
    };
    let value = stop.to_annotation();
    assert_eq!(
        value,
        r#"{"at":"2026-01-05T10:00:00Z","reloads":20,"within":"10m","resource":"ConfigMap/app"}"#
    );
    assert_eq!(LoopStop::parse(&value), Ok(stop));
    for bad in [
        "",
        "stopped",
        r#"{"at":"yesterday","reloads":20,"within":"10m","resource":"ConfigMap/app"}"#,
        r#"{"at":"2026-01-05T10:00:00Z","reloads":20,"within":"10","resource":"ConfigMap/app"}"#,
        r#"{"at":"2026-01-05T10:00:00Z","reloads":-1,"within":"10m","resource":"ConfigMap/app"}"#,
        r#"{"at":"2026-01-05T10:00:00Z","within":"10m","resource":"ConfigMap/app"}"#,
    ] {
        let problem = LoopStop::parse(bad).unwrap_err();
        assert_eq!((problem.annotation, problem.value.as_str()), (LOOP_STOPPED, bad));
    }
}
