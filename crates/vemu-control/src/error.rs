//! The error of the controller's operations on a lab.

/// Why an operation on a lab failed. The request was wrong (`Invalid`, `NotFound`: the
/// lab is unchanged), a machine of the lab did not answer (`Unavailable`), or the lab
/// could not carry it out (`Internal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabError {
    /// A value out of range, a change that is not allowed, a malformed request.
    Invalid(String),
    /// No node, link, segment or interface of that name.
    NotFound(String),
    /// A machine that was to carry it out does not answer (it was lost).
    Unavailable(String),
    Internal(String),
}

impl LabError {
    pub fn invalid(m: impl Into<String>) -> LabError {
        LabError::Invalid(m.into())
    }
    pub fn not_found(m: impl Into<String>) -> LabError {
        LabError::NotFound(m.into())
    }
    pub fn internal(m: impl Into<String>) -> LabError {
        LabError::Internal(m.into())
    }
    pub fn message(&self) -> &str {
        match self {
            LabError::Invalid(m)
            | LabError::NotFound(m)
            | LabError::Unavailable(m)
            | LabError::Internal(m) => m,
        }
    }
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for LabError {}

pub(crate) use vemu_machine::route::error_message;

/// A refused order as the lab's error: the caller's fault is a bad request, a lost
/// machine's makes the lab unavailable for it, the rest is internal.
impl From<vemu_machine::worker::WorkerError> for LabError {
    fn from(e: vemu_machine::worker::WorkerError) -> LabError {
        match e.fault {
            vemu_machine::worker::Fault::Caller => LabError::Invalid(e.message),
            vemu_machine::worker::Fault::Lost => LabError::Unavailable(e.message),
            vemu_machine::worker::Fault::Internal => LabError::Internal(e.message),
        }
    }
}
