//! Go-style durations (`300ms`, `1m30s`, `2h`).
