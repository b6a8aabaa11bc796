//! Maintenance windows: the times of the week a workload may be reloaded.
//!
//! Syntax: one or more windows separated by `;`, each `<days> <HH:MM>-<HH:MM> <time zone>`:
//!
//! - days: `*` (every day), a day (`Mon`), a range (`Mon-Fri`; it may wrap: `Fri-Mon`) or a
//!   comma list of days and ranges without spaces (`Mon,Wed,Fri-Sun`). Day names are `Mon`
//!   `Tue` `Wed` `Thu` `Fri` `Sat` `Sun`, in any case.
//! - times: `00:00` to `23:59`; the end may also be `24:00`. The end is exclusive, so
//!   `Mon 02:00-04:00` takes a reload at 03:59 but not at 04:00. An end before the start crosses
//!   midnight, and the window belongs to the day it starts on: `Fri 22:00-02:00` is Friday 22:00
//!   to Saturday 02:00. Start and end must differ.
//! - time zone: an IANA name (`Europe/Berlin`, `America/New_York`) or `UTC`, from the database
//!   bundled in the binary (the image has none).
//!
//! For example `Mon-Fri 02:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00 UTC`. A value holds at
//! most [`MAX_WINDOWS`] windows and [`MAX_BYTES`] bytes: annotations are user input.
//!
//! Times are the zone's wall clock. Each day a window is open from the first instant the clock
//! reads its start (or later) until the clock has passed its end for good. So when clocks skip
//! forward (a gap), a start inside the gap opens when the gap ends (`02:30` in Berlin on
//! 2026-03-29 opens at 03:00 CEST) and an end inside it closes there too; a window lying wholly
//! inside the gap does not open that day, as its times never appear on the clock. When clocks
//! fall back (a fold), the window opens at the first occurrence of its start and closes at the
//! second occurrence of its end: one continuous span that covers every instant the clock shows
//! a time inside the window, at the price of being an hour longer that night.

use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Span, Timestamp};

#[cfg(test)]
mod tests;

/// The most windows one value may hold.
pub const MAX_WINDOWS: usize = 32;
/// The longest value accepted, in bytes.
pub const MAX_BYTES: usize = 256;

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const EVERY_DAY: u8 = 0b111_1111;
const MINUTES_PER_DAY: u16 = 24 * 60;
/// How far [`Windows::next_open`] and [`Windows::closes_after`] look: a listed weekday recurs
/// within 7 days, and a DST gap can hide one occurrence at most.
const SEARCH_DAYS: i64 = 15;

/// One or more maintenance windows (see the module doc for the syntax and the DST rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Windows(Vec<Window>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    /// Bit `n` set: open on the day `n` days after Monday.
    days: u8,
    /// Minutes after midnight, `0..1440`.
    start: u16,
    /// Minutes after midnight, `0..=1440`; before `start`: on the next day.
    end: u16,
    zone: TimeZone,
    /// The canonical IANA name, to write the value back.
    zone_name: Box<str>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("maintenance windows of {0} bytes: at most {MAX_BYTES}")]
    TooLong(usize),
    #[error("{0} maintenance windows: at most {MAX_WINDOWS}")]
    TooMany(usize),
    #[error("empty window in {0:?}")]
    EmptyWindow(String),
    #[error("missing {part} in {window:?} (expected <days> <HH:MM>-<HH:MM> <time zone>)")]
    MissingPart { part: &'static str, window: String },
    #[error("unexpected {extra:?} after the time zone in {window:?}")]
    Unexpected { extra: String, window: String },
    #[error("unknown day {day:?} in {window:?}")]
    UnknownDay { day: String, window: String },
    #[error("invalid time range {range:?} in {window:?} (expected HH:MM-HH:MM)")]
    BadTimeRange { range: String, window: String },
    #[error("invalid time {time:?} in {window:?} (expected 00:00 to 23:59, or 24:00 for an end)")]
    BadTime { time: String, window: String },
    #[error("time range {range:?} in {window:?} is empty: start and end are the same")]
    EmptyTimeRange { range: String, window: String },
    #[error("unknown time zone {0:?}")]
    UnknownZone(String),
}

impl FromStr for Windows {
    type Err = WindowError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.len() > MAX_BYTES {
            return Err(WindowError::TooLong(text.len()));
        }
        let count = text.split(';').count();
        if count > MAX_WINDOWS {
            return Err(WindowError::TooMany(count));
        }
        text.split(';')
            .map(|window| Window::parse(window.trim(), text))
            .collect::<Result<_, _>>()
            .map(Windows)
    }
}

impl Window {
    fn parse(window: &str, value: &str) -> Result<Self, WindowError> {
        let mut parts = window.split_whitespace();
        let missing = |part| WindowError::MissingPart { part, window: window.to_owned() };
        let days = parts.next().ok_or_else(|| WindowError::EmptyWindow(value.to_owned()))?;
        if days.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(missing("days"));
        }
        let days = parse_days(days, window)?;
        let range = parts.next().ok_or_else(|| missing("time range"))?;
        let (start, end) = parse_time_range(range, window)?;
        let zone_text = parts.next().ok_or_else(|| missing("time zone"))?;
        if let Some(extra) = parts.next() {
            return Err(WindowError::Unexpected { extra: extra.to_owned(), window: window.to_owned() });
        }
        let zone = TimeZone::get(zone_text).map_err(|_| WindowError::UnknownZone(zone_text.to_owned()))?;
        let zone_name = zone.iana_name().unwrap_or(zone_text).into();
        Ok(Window { days, start, end, zone, zone_name })
    }

    /// The span of instants this window is open for, when it opens on `date`; `None` when it
    /// does not open that day (not a listed day, or wholly inside a DST gap).
    fn span_on(&self, date: Date) -> Option<(Timestamp, Timestamp)> {
        if self.days & (1 << date.weekday().to_monday_zero_offset()) == 0 {
            return None;
        }
        let end_date =
            if self.end <= self.start || self.end == MINUTES_PER_DAY { date.tomorrow().ok()? } else { date };
        let open = first_instant_reading(&self.zone, wall_time(date, self.start))?;
        let close = last_instant_reading(&self.zone, wall_time(end_date, self.end % MINUTES_PER_DAY))?;
        (open < close).then_some((open, close))
    }

    /// The spans opening on the days `days` away from the local day of `at`.
    fn spans_near(
        &self,
        at: Timestamp,
        days: RangeInclusive<i64>,
    ) -> impl Iterator<Item = (Timestamp, Timestamp)> + '_ {
        let today = self.zone.to_datetime(at).date();
        days.filter_map(move |offset| self.span_on(today.checked_add(Span::new().days(offset)).ok()?))
    }
}

/// The days around an instant whose windows may hold it: one crossing midnight opened the day
/// before, and a fold at midnight shifts the date by one more.
const AROUND: RangeInclusive<i64> = -2..=1;

fn wall_time(date: Date, minutes: u16) -> DateTime {
    date.at((minutes / 60) as i8, (minutes % 60) as i8, 0, 0)
}

/// The first instant at which the zone's clock reads `wall` or later: the end of a gap that
/// skips `wall`, the first occurrence in a fold.
fn first_instant_reading(zone: &TimeZone, wall: DateTime) -> Option<Timestamp> {
    let ambiguous = zone.to_ambiguous_timestamp(wall);
    match ambiguous.offset() {
        AmbiguousOffset::Gap { .. } => end_of_gap(zone, ambiguous.earlier().ok()?),
        _ => ambiguous.earlier().ok(),
    }
}

/// The instant after which the zone's clock never again reads before `wall`: the end of a gap
/// that skips `wall`, the second occurrence in a fold.
fn last_instant_reading(zone: &TimeZone, wall: DateTime) -> Option<Timestamp> {
    let ambiguous = zone.to_ambiguous_timestamp(wall);
    match ambiguous.offset() {
        AmbiguousOffset::Gap { .. } => end_of_gap(zone, ambiguous.earlier().ok()?),
        _ => ambiguous.later().ok(),
    }
}

/// The transition ending the gap, from an instant before it (the gap's time read with the
/// offset after it).
fn end_of_gap(zone: &TimeZone, before: Timestamp) -> Option<Timestamp> {
    zone.following(before).next().map(|transition| transition.timestamp())
}

impl Windows {
    pub fn contains(&self, at: Timestamp) -> bool {
        self.latest_close(at).is_some()
    }

    /// The latest close of the windows holding `at`.
    fn latest_close(&self, at: Timestamp) -> Option<Timestamp> {
        let holding = |&(open, close): &(Timestamp, Timestamp)| open <= at && at < close;
        self.0.iter().flat_map(|w| w.spans_near(at, AROUND)).filter(holding).map(|(_, close)| close).max()
    }

    /// `at` if inside a window, else the instant the next window opens.
    pub fn next_open(&self, at: Timestamp) -> Timestamp {
        if self.contains(at) {
            return at;
        }
        self.0
            .iter()
            .flat_map(|window| window.spans_near(at, -1..=SEARCH_DAYS))
            .map(|(open, _)| open)
            .filter(|&open| open > at)
            .min()
            // Unreachable for a parsed value (every window opens within the search, short of the
            // end of time): a reload outside its window rather than never.
            .unwrap_or(at)
    }

    /// When the windows containing `at` close (None if `at` is outside). Windows that touch or
    /// overlap count as one; for windows that never close, the end of the search, 15 days on.
    pub fn closes_after(&self, at: Timestamp) -> Option<Timestamp> {
        let mut until = self.latest_close(at)?;
        let limit = at.saturating_add(SignedDuration::from_hours(24 * SEARCH_DAYS)).unwrap_or(Timestamp::MAX);
        while until < limit {
            match self.latest_close(until) {
                Some(close) => until = close,
                None => return Some(until),
            }
        }
        Some(limit)
    }
}

impl fmt::Display for Windows {
    /// `;` without a space: never longer than the text it was parsed from, so it parses back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, window) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write_days(f, window.days)?;
            let hhmm = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
            write!(f, " {}-{} {}", hhmm(window.start), hhmm(window.end), window.zone_name)?;
        }
        Ok(())
    }
}

/// Days as runs around the week (`Fri-Mon` stays one run), so the text is never longer than
/// the one parsed.
fn write_days(f: &mut fmt::Formatter<'_>, days: u8) -> fmt::Result {
    if days == EVERY_DAY {
        return f.write_str("*");
    }
    let listed = |day: usize| days & (1 << (day % 7)) != 0;
    // From Monday, unless a run wraps from Sunday to Monday: then after a day not listed, so
    // that run is not cut in two.
    let first = if listed(0) && listed(6) { (0..7).find(|&day| !listed(day)).unwrap_or(0) + 1 } else { 0 };
    let mut runs = Vec::new();
    let mut day = first;
    while day < first + 7 {
        if !listed(day) {
            day += 1;
            continue;
        }
        let run_start = day;
        while day + 1 < first + 7 && listed(day + 1) {
            day += 1;
        }
        runs.push(if run_start == day {
            DAY_NAMES[day % 7].to_owned()
        } else {
            format!("{}-{}", DAY_NAMES[run_start % 7], DAY_NAMES[day % 7])
        });
        day += 1;
    }
    f.write_str(&runs.join(","))
}

fn parse_days(text: &str, window: &str) -> Result<u8, WindowError> {
    if text == "*" {
        return Ok(EVERY_DAY);
    }
    let day = |name: &str| {
        DAY_NAMES
            .iter()
            .position(|d| d.eq_ignore_ascii_case(name))
            .ok_or_else(|| WindowError::UnknownDay { day: name.to_owned(), window: window.to_owned() })
    };
    let mut days = 0u8;
    for item in text.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (day(first)?, day(last)?),
            None => (day(item)?, day(item)?),
        };
        let length = (last + 7 - first) % 7;
        for step in 0..=length {
            days |= 1 << ((first + step) % 7);
        }
    }
    Ok(days)
}

fn parse_time_range(range: &str, window: &str) -> Result<(u16, u16), WindowError> {
    let bad_range = || WindowError::BadTimeRange { range: range.to_owned(), window: window.to_owned() };
    let (start, end) = range.split_once('-').ok_or_else(bad_range)?;
    let (start, end) = (parse_time(start, false, window)?, parse_time(end, true, window)?);
    if start == end {
        return Err(WindowError::EmptyTimeRange { range: range.to_owned(), window: window.to_owned() });
    }
    Ok((start, end))
}

/// `HH:MM` as minutes after midnight; `24:00` only for an end.
fn parse_time(time: &str, is_end: bool, window: &str) -> Result<u16, WindowError> {
    let bad = || WindowError::BadTime { time: time.to_owned(), window: window.to_owned() };
    let two_digits = |s: &str| match s.as_bytes() {
        [a @ b'0'..=b'9', b @ b'0'..=b'9'] => Ok(u16::from(a - b'0') * 10 + u16::from(b - b'0')),
        _ => Err(bad()),
    };
    let (hours, minutes) = time.split_once(':').ok_or_else(bad)?;
    match (two_digits(hours)?, two_digits(minutes)?) {
        (hours @ 0..24, minutes @ 0..60) => Ok(hours * 60 + minutes),
        (24, 0) if is_end => Ok(MINUTES_PER_DAY),
        _ => Err(bad()),
    }
}
