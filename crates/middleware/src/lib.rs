//! moirai middleware (being written).
