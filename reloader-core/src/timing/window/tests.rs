use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn windows(text: &str) -> Windows {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn valid_values_parse_and_print_normalized() {
    let cases = [
        ("Mon-Fri 02:00-04:00 Europe/Berlin", "Mon-Fri 02:00-04:00 Europe/Berlin"),
        (
            "  mon-FRI 02:00-04:00   europe/berlin ;  sat,sun 00:00-24:00 UTC ",
            "Mon-Fri 02:00-04:00 Europe/Berlin;Sat-Sun 00:00-24:00 UTC",
        ),
        ("Fri-Mon 22:00-02:00 America/New_York", "Fri-Mon 22:00-02:00 America/New_York"),
        ("Mon-Sun 00:00-01:00 UTC", "* 00:00-01:00 UTC"),
        ("Tue-Mon 00:00-01:00 UTC", "* 00:00-01:00 UTC"),
        ("Mon,Wed,Fri-Sun 01:00-02:00 UTC", "Wed,Fri-Mon 01:00-02:00 UTC"),
        ("Sun,Sat,Sat 05:00-06:00 UTC", "Sat-Sun 05:00-06:00 UTC"),
        ("Tue-Tue 23:59-00:00 UTC", "Tue 23:59-00:00 UTC"),
        ("Mon,Wed 00:00-24:00 Asia/Kolkata", "Mon,Wed 00:00-24:00 Asia/Kolkata"),
        ("sun 01:00-02:00 utc", "Sun 01:00-02:00 UTC"),
    ];
    for (text, normalized) in cases {
        let parsed = windows(text);
        assert_eq!(parsed.to_string(), normalized, "{text}");
        assert_eq!(windows(normalized), parsed, "round trip of {text}");
    }
}

#[test]
fn invalid_values_name_the_offending_part() {
    let missing = |part: &str, window: &str| {
        format!("missing {part} in {window:?} (expected <days> <HH:MM>-<HH:MM> <time zone>)")
    };
    let bad_time = |time: &str, window: &str| {
        format!("invalid time {time:?} in {window:?} (expected 00:00 to 23:59, or 24:00 for an end)")
    };
    let cases = [
        ("", r#"empty window in """#.to_owned()),
        ("Mon 02:00-04:00 UTC;", r#"empty window in "Mon 02:00-04:00 UTC;""#.to_owned()),
        ("Mun-Fri 02:00-04:00 UTC", r#"unknown day "Mun" in "Mun-Fri 02:00-04:00 UTC""#.to_owned()),
        ("Mon,,Tue 02:00-04:00 UTC", r#"unknown day "" in "Mon,,Tue 02:00-04:00 UTC""#.to_owned()),
        ("Monday 02:00-04:00 UTC", r#"unknown day "Monday" in "Monday 02:00-04:00 UTC""#.to_owned()),
        ("Mon,* 02:00-04:00 UTC", r#"unknown day "*" in "Mon,* 02:00-04:00 UTC""#.to_owned()),
        ("Mon 02:00-04:00 Europe/Berln", r#"unknown time zone "Europe/Berln""#.to_owned()),
        ("Mon 02:00-04:00", missing("time zone", "Mon 02:00-04:00")),
        ("Mon", missing("time range", "Mon")),
        ("02:00-04:00 UTC", missing("days", "02:00-04:00 UTC")),
        (
            "Mon 02:00-04:00 UTC x",
            r#"unexpected "x" after the time zone in "Mon 02:00-04:00 UTC x""#.to_owned(),
        ),
        ("Mon 0200 UTC", r#"invalid time range "0200" in "Mon 0200 UTC" (expected HH:MM-HH:MM)"#.to_owned()),
        ("Mon 2:00-04:00 UTC", bad_time("2:00", "Mon 2:00-04:00 UTC")),
        ("Mon 24:00-02:00 UTC", bad_time("24:00", "Mon 24:00-02:00 UTC")),
        ("Mon 02:00-24:01 UTC", bad_time("24:01", "Mon 02:00-24:01 UTC")),
        ("Mon 02:60-03:00 UTC", bad_time("02:60", "Mon 02:60-03:00 UTC")),
        ("Mon 02:00--03:00 UTC", bad_time("-03:00", "Mon 02:00--03:00 UTC")),
        (
            "Mon 02:00-02:00 UTC",
            r#"time range "02:00-02:00" in "Mon 02:00-02:00 UTC" is empty: start and end are the same"#
                .to_owned(),
        ),
        (&"Mon 02:00-04:00 UTC;".repeat(14), "maintenance windows of 280 bytes: at most 256".to_owned()),
        (&";".repeat(40), "41 maintenance windows: at most 32".to_owned()),
    ];
    for (text, message) in cases {
        assert_eq!(text.parse::<Windows>().unwrap_err().to_string(), message, "{text:?}");
    }
}

#[test]
fn open_and_next_open_on_the_wall_clock() {
    // 2026-01-05 is a Monday.
    let cases = [
        ("Mon-Fri 02:00-04:00 UTC", "2026-01-05T03:59:59Z", true, "2026-01-05T03:59:59Z"),
        ("Mon-Fri 02:00-04:00 UTC", "2026-01-05T04:00:00Z", false, "2026-01-06T02:00:00Z"),
        ("Mon-Fri 02:00-04:00 UTC", "2026-01-05T01:59:59Z", false, "2026-01-05T02:00:00Z"),
        ("Mon-Fri 02:00-04:00 UTC", "2026-01-09T05:00:00Z", false, "2026-01-12T02:00:00Z"),
        // Across midnight: the window belongs to the day it starts on.
        ("Fri 22:00-02:00 UTC", "2026-01-10T01:00:00Z", true, "2026-01-10T01:00:00Z"),
        ("Fri 22:00-02:00 UTC", "2026-01-10T02:00:00Z", false, "2026-01-16T22:00:00Z"),
        ("Fri 22:00-02:00 UTC", "2026-01-09T01:00:00Z", false, "2026-01-09T22:00:00Z"),
        // Across the week's end, and a day range that wraps.
        ("Sun 22:00-02:00 UTC", "2026-01-12T01:30:00Z", true, "2026-01-12T01:30:00Z"),
        ("Sun 22:00-02:00 UTC", "2026-01-05T02:30:00Z", false, "2026-01-11T22:00:00Z"),
        ("Sat-Mon 10:00-11:00 UTC", "2026-01-11T10:30:00Z", true, "2026-01-11T10:30:00Z"),
        ("Sat-Mon 10:00-11:00 UTC", "2026-01-06T10:30:00Z", false, "2026-01-10T10:00:00Z"),
        ("Sat-Mon 10:00-11:00 UTC", "2026-01-11T11:00:00Z", false, "2026-01-12T10:00:00Z"),
        // 24:00 ends at midnight, exclusive.
        ("Fri 22:00-24:00 UTC", "2026-01-09T23:59:59Z", true, "2026-01-09T23:59:59Z"),
        ("Fri 22:00-24:00 UTC", "2026-01-10T00:00:00Z", false, "2026-01-16T22:00:00Z"),
        ("* 00:00-24:00 UTC", "2026-01-10T00:00:00Z", true, "2026-01-10T00:00:00Z"),
        // The zone's wall clock: 09:00 in Berlin is 08:00Z in winter, 07:00Z in summer.
        ("Mon-Fri 09:00-17:00 Europe/Berlin", "2026-01-05T07:30:00Z", false, "2026-01-05T08:00:00Z"),
        ("Mon-Fri 09:00-17:00 Europe/Berlin", "2026-07-06T07:30:00Z", true, "2026-07-06T07:30:00Z"),
        // Several windows: the earliest next.
        ("Wed 01:00-02:00 UTC;Tue 05:00-06:00 UTC", "2026-01-05T12:00:00Z", false, "2026-01-06T05:00:00Z"),
    ];
    for (text, instant, inside, next) in cases {
        let (w, instant) = (windows(text), at(instant));
        assert_eq!(w.contains(instant), inside, "{text} contains {instant}");
        assert_eq!(w.next_open(instant), at(next), "{text} next open after {instant}");
    }
}

#[test]
fn windows_close_at_their_end_and_touching_windows_count_as_one() {
    let cases = [
        ("Mon-Fri 02:00-04:00 UTC", "2026-01-05T03:00:00Z", Some("2026-01-05T04:00:00Z")),
        ("Mon-Fri 02:00-04:00 UTC", "2026-01-05T04:00:00Z", None),
        ("Fri 22:00-02:00 UTC", "2026-01-09T23:00:00Z", Some("2026-01-10T02:00:00Z")),
        ("Fri 22:00-24:00 UTC;Sat 00:00-01:00 UTC", "2026-01-09T23:00:00Z", Some("2026-01-10T01:00:00Z")),
        ("Fri 22:00-23:30 UTC;Fri 23:00-23:45 UTC", "2026-01-09T22:10:00Z", Some("2026-01-09T23:45:00Z")),
        ("Sat-Sun 00:00-24:00 UTC", "2026-01-10T12:00:00Z", Some("2026-01-12T00:00:00Z")),
        ("* 00:00-24:00 UTC", "2026-01-10T12:00:00Z", Some("2026-01-25T12:00:00Z")),
    ];
    for (text, instant, closes) in cases {
        assert_eq!(windows(text).closes_after(at(instant)), closes.map(at), "{text} at {instant}");
    }
}

#[test]
fn the_ends_of_time_do_not_panic() {
    let w = windows("Fri 22:00-02:00 Europe/Berlin");
    assert_eq!(w.next_open(Timestamp::MAX), Timestamp::MAX);
    for instant in [Timestamp::MIN, Timestamp::MAX] {
        assert_eq!(w.closes_after(instant).is_some(), w.contains(instant));
    }
}

#[test]
fn daylight_saving_transitions() {
    // Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z); 2026-10-25 03:00 CEST -> 02:00 CET
    // (01:00Z). New York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 2026-11-01 02:00 EDT ->
    // 01:00 EST (06:00Z). All Sundays.
    // (windows, an instant before, the next opening, the close of that window)
    let cases = [
        // A start in the gap opens when the gap ends.
        (
            "Sun 02:30-04:00 Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "2026-03-29T04:00:00+02:00",
        ),
        // An end in the gap closes when the gap ends.
        (
            "Sun 01:00-02:30 Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-03-29T01:00:00+01:00",
            "2026-03-29T03:00:00+02:00",
        ),
        // Wholly inside the gap: its times never appear, the next Sunday's opens.
        (
            "Sun 02:00-02:30 Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-04-05T02:00:00+02:00",
            "2026-04-05T02:30:00+02:00",
        ),
        (
            "* 02:00-03:00 Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-03-30T02:00:00+02:00",
            "2026-03-30T03:00:00+02:00",
        ),
        // In the fold: the first 02:30 to the second 02:45, one span.
        (
            "Sun 02:30-02:45 Europe/Berlin",
            "2026-10-24T12:00:00Z",
            "2026-10-25T02:30:00+02:00",
            "2026-10-25T02:45:00+01:00",
        ),
        (
            "Sun 01:00-02:30 Europe/Berlin",
            "2026-10-24T12:00:00Z",
            "2026-10-25T01:00:00+02:00",
            "2026-10-25T02:30:00+01:00",
        ),
        (
            "Sun 02:15-03:30 America/New_York",
            "2026-03-07T12:00:00Z",
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T03:30:00-04:00",
        ),
        (
            "Sun 01:30-02:00 America/New_York",
            "2026-10-31T12:00:00Z",
            "2026-11-01T01:30:00-04:00",
            "2026-11-01T02:00:00-05:00",
        ),
        // Across midnight into the fold.
        (
            "Sat 23:00-01:30 America/New_York",
            "2026-10-31T12:00:00Z",
            "2026-10-31T23:00:00-04:00",
            "2026-11-01T01:30:00-05:00",
        ),
    ];
    for (text, before, opens, closes) in cases {
        let (w, opens, closes) = (windows(text), at(opens), at(closes));
        assert_eq!(w.next_open(at(before)), opens, "{text} opens");
        assert_eq!(w.closes_after(opens), Some(closes), "{text} closes");
        let just_before = |t: Timestamp| t - SignedDuration::from_nanos(1);
        assert!(
            !w.contains(just_before(opens)) && w.contains(just_before(closes)) && !w.contains(closes),
            "{text}"
        );
    }
    // Inside the fold's span, the clock reads 02:00 CET: outside 02:30-02:45, yet open.
    assert!(windows("Sun 02:30-02:45 Europe/Berlin").contains(at("2026-10-25T02:00:00+01:00")));
}
