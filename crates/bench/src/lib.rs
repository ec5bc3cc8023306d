//! moirai lab (being written).
