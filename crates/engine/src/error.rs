//! Errors of the engine's public API that more than one module returns.

/// A setting the engine cannot honour: a threading model, a rate, a window, an exchange. The
/// message names the setting and says how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSetting {
    /// Which setting: the text given (`dynamic:0`) or its name (`rate`, `window`).
    pub setting: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl InvalidSetting {
    /// `message` about `setting`.
    pub fn new(setting: &str, message: impl Into<String>) -> InvalidSetting {
        InvalidSetting { setting: setting.to_string(), message: message.into() }
    }
}
