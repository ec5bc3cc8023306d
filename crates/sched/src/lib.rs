//! moirai scheduling core (being written).
