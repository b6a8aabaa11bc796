use super::*;

const MINUTE: Duration = Duration::from_secs(60);

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// The timing of a Deployment annotated with `pairs`, read from its view.
fn timing_of(pairs: &[(&str, &str)], default: Option<&Arc<Windows>>) -> (Timing, Vec<TimingProblem>) {
    let workload = pairs.iter().fold(crate::testkit::deployment("app"), |w, (k, v)| w.annotate(k, v));
    workload.view().reload_timing(default)
}

fn windows(text: &str) -> Option<Arc<Windows>> {
    Some(Arc::new(text.parse().unwrap()))
}

#[test]
fn timing_comes_from_the_annotations_and_bad_values_behave_as_absent() {
    let default = windows("* 02:00-04:00 UTC");
    let timing = |delay, min_interval, windows: &Option<Arc<Windows>>| Timing {
        delay,
        min_interval,
        windows: windows.clone(),
    };
    let weekdays = windows("Mon-Fri 02:00-04:00 UTC");
    // (annotations, default windows, expected timing, annotations with a problem)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a Option<Arc<Windows>>, Timing, &'a [&'a str]);
    let cases: Vec<Case> = vec![
        (&[], &None, Timing::default(), &[]),
        (&[], &default, timing(Duration::ZERO, Duration::ZERO, &default), &[]),
        (&[(DELAY, "5m")], &None, timing(5 * MINUTE, Duration::ZERO, &None), &[]),
        (&[(DELAY, " 90s ")], &None, timing(Duration::from_secs(90), Duration::ZERO, &None), &[]),
        (&[(DELAY, "soon")], &None, Timing::default(), &[DELAY]),
        (&[(DELAY, "-5m")], &None, Timing::default(), &[DELAY]),
        (&[(MIN_INTERVAL, "1h")], &None, timing(Duration::ZERO, 60 * MINUTE, &None), &[]),
        (&[(MIN_INTERVAL, "1d")], &None, Timing::default(), &[MIN_INTERVAL]),
        (
            &[(MAINTENANCE_WINDOW, "Mon-Fri 02:00-04:00 UTC")],
            &default,
            timing(Duration::ZERO, Duration::ZERO, &weekdays),
            &[],
        ),
        (&[(MAINTENANCE_WINDOW, "always")], &default, Timing::default(), &[]),
        (&[(MAINTENANCE_WINDOW, " Always ")], &None, Timing::default(), &[]),
        (
            &[(MAINTENANCE_WINDOW, "Mun 02:00-04:00 UTC")],
            &default,
            timing(Duration::ZERO, Duration::ZERO, &default),
            &[MAINTENANCE_WINDOW],
        ),
        (&[(MAINTENANCE_WINDOW, "never")], &None, Timing::default(), &[MAINTENANCE_WINDOW]),
        (
            &[(DELAY, "x"), (MIN_INTERVAL, "y"), (MAINTENANCE_WINDOW, "z")],
            &default,
            timing(Duration::ZERO, Duration::ZERO, &default),
            &[DELAY, MIN_INTERVAL, MAINTENANCE_WINDOW],
        ),
    ];
    for (pairs, default, expected, problem_keys) in cases {
        let (timing, problems) = timing_of(pairs, default.as_ref());
        assert_eq!(timing, expected, "{pairs:?}");
        assert_eq!(problems.iter().map(|p| p.annotation).collect::<Vec<_>>(), problem_keys, "{pairs:?}");
    }
    assert_eq!(timing_of(&[], default.as_ref()).0.windows, default);
    let (_, problems) = timing_of(&[(DELAY, "soon")], None);
    assert_eq!(
        problems[0].to_string(),
        r#"annotation reloader.dev/delay: invalid value "soon": invalid duration "soon""#
    );
}

#[test]
fn only_a_timing_without_delay_interval_or_windows_is_immediate() {
    assert!(Timing::default().is_immediate());
    assert!(!Timing { delay: MINUTE, ..Timing::default() }.is_immediate());
    assert!(!Timing { min_interval: MINUTE, ..Timing::default() }.is_immediate());
    assert!(!Timing { windows: windows("* 02:00-04:00 UTC"), ..Timing::default() }.is_immediate());
}

#[test]
fn release_waits_for_the_latest_bound_then_a_window_and_names_what_decided() {
    use HoldReason::{Delay, MaintenanceWindow, MinInterval};
    let changed = at("2026-01-05T10:00:00Z");
    let (m5, m30, m45, h1) = (5 * MINUTE, 30 * MINUTE, 45 * MINUTE, 60 * MINUTE);
    let zero = Duration::ZERO;
    // (delay, min interval, windows, last reload, released at, held by)
    let cases = [
        (zero, zero, None, None, "2026-01-05T10:00:00Z", None),
        (m5, zero, None, None, "2026-01-05T10:05:00Z", Some(Delay)),
        (zero, h1, None, Some("2026-01-05T09:30:00Z"), "2026-01-05T10:30:00Z", Some(MinInterval)),
        (zero, h1, None, Some("2026-01-05T08:00:00Z"), "2026-01-05T10:00:00Z", None),
        (zero, h1, None, None, "2026-01-05T10:00:00Z", None),
        (zero, zero, None, Some("2026-01-05T10:10:00Z"), "2026-01-05T10:00:00Z", None),
        (m5, h1, None, Some("2026-01-05T09:30:00Z"), "2026-01-05T10:30:00Z", Some(MinInterval)),
        (m45, h1, None, Some("2026-01-05T09:30:00Z"), "2026-01-05T10:45:00Z", Some(Delay)),
        (m30, h1, None, Some("2026-01-05T09:30:00Z"), "2026-01-05T10:30:00Z", Some(Delay)),
        (zero, zero, Some("* 09:00-11:00 UTC"), None, "2026-01-05T10:00:00Z", None),
        (zero, zero, Some("* 02:00-04:00 UTC"), None, "2026-01-06T02:00:00Z", Some(MaintenanceWindow)),
        (m5, zero, Some("* 09:00-11:00 UTC"), None, "2026-01-05T10:05:00Z", Some(Delay)),
        (m5, zero, Some("* 10:30-11:00 UTC"), None, "2026-01-05T10:30:00Z", Some(MaintenanceWindow)),
        (m5, zero, Some("* 09:00-10:03 UTC"), None, "2026-01-06T09:00:00Z", Some(MaintenanceWindow)),
        (
            zero,
            h1,
            Some("* 09:00-11:00 UTC"),
            Some("2026-01-05T09:30:00Z"),
            "2026-01-05T10:30:00Z",
            Some(MinInterval),
        ),
        (
            zero,
            h1,
            Some("* 11:00-12:00 UTC"),
            Some("2026-01-05T09:30:00Z"),
            "2026-01-05T11:00:00Z",
            Some(MaintenanceWindow),
        ),
        (
            m45,
            h1,
            Some("* 10:40-12:00 UTC"),
            Some("2026-01-05T09:30:00Z"),
            "2026-01-05T10:45:00Z",
            Some(Delay),
        ),
    ];
    for (delay, min_interval, window, last, expected_at, held_by) in cases {
        let timing = Timing { delay, min_interval, windows: window.and_then(windows) };
        let release = timing.release_at(changed, last.map(at));
        assert_eq!(release, Release { at: at(expected_at), held_by }, "{timing:?} last {last:?}");
    }
}

#[test]
fn hold_reasons_have_stable_names() {
    let names: Vec<_> = HoldReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(names, ["delay", "min-interval", "maintenance-window"]);
    for reason in HoldReason::ALL {
        assert_eq!(HoldReason::parse(reason.as_str()), Some(reason));
    }
}

#[test]
fn a_held_reload_round_trips_sorted_and_deduplicated() {
    let held = HeldReload {
        since: at("2026-01-05T10:00:00Z"),
        until: at("2026-01-06T02:00:00.5Z"),
        reason: HoldReason::MaintenanceWindow,
        resources: vec![
            (ResourceKind::SecretProviderClass, "vault".to_owned()),
            (ResourceKind::Secret, "db".to_owned()),
            (ResourceKind::ConfigMap, "app".to_owned()),
            (ResourceKind::Secret, "db".to_owned()),
        ],
    };
    let value = held.to_annotation();
    assert_eq!(
        value,
        r#"{"since":"2026-01-05T10:00:00Z","until":"2026-01-06T02:00:00.5Z","reason":"maintenance-window","resources":["ConfigMap/app","Secret/db","SecretProviderClass/vault"]}"#
    );
    let read = HeldReload::parse(&value).unwrap();
    assert_eq!(read.resources.len(), 3);
    assert_eq!(read.to_annotation(), value);
    assert_eq!(HeldReload { resources: held.resources[..3].to_vec(), ..held.clone() }.to_annotation(), value);
}

#[test]
fn an_unreadable_held_reload_is_a_problem() {
    let valid = r#"{"since":"2026-01-05T10:00:00Z","until":"2026-01-05T10:05:00Z","reason":"delay","resources":["ConfigMap/app"]}"#;
    let cases = [
        ("", "EOF while parsing"),
        ("held", "expected value"),
        (&valid.replace("delay", "later"), r#"unknown reason "later""#),
        (&valid.replace("2026-01-05T10:00:00Z", "yesterday"), r#"invalid time "yesterday""#),
        (&valid.replace("ConfigMap/app", "Pod/app"), r#"invalid resource "Pod/app""#),
        (&valid.replace("ConfigMap/app", "ConfigMap/"), r#"invalid resource "ConfigMap/""#),
        (&valid.replace("ConfigMap/app", "app"), r#"invalid resource "app""#),
        (&valid.replace(r#","reason":"delay""#, ""), "missing field `reason`"),
    ];
    for (value, reason) in cases {
        let problem = HeldReload::parse(value).unwrap_err();
        assert_eq!((problem.annotation, problem.value.as_str()), (HELD, value));
        assert!(problem.reason.starts_with(reason), "{value}: {}", problem.reason);
    }
}

#[test]
fn durations_people_read_drop_zero_units() {
    let cases = [
        (Duration::ZERO, "0s"),
        (Duration::from_secs(5), "5s"),
        (10 * MINUTE, "10m"),
        (Duration::from_secs(3_605), "1h5s"),
        (Duration::from_secs(5_400), "1h30m"),
        (Duration::from_millis(1_500), "1.5s"),
    ];
    for (duration, text) in cases {
        assert_eq!(short_go_duration(duration), text);
        assert_eq!(parse_go_duration(text), Ok(duration));
    }
}
