//! The one error type of the library, with the exit code each kind maps to.

use crate::manifest::read::ReadError;
use crate::manifest::YamlError;

/// A function config or flag the tool cannot use. Kept here, not in `config`, so the
/// error layer depends on nothing above it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("function config: {0}")]
pub struct ConfigError(pub String);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{file}: document {doc}: {source}")]
    Yaml {
        file: String,
        /// 1-based, as people count documents.
        doc: usize,
        #[source]
        source: YamlError,
    },
    #[error("{file}: document {doc} (line {line}): {message}")]
    Invalid {
        file: String,
        doc: usize,
        line: u32,
        message: String,
    },
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Usage(String),
    /// Findings were already reported; this only carries the exit status.
    #[error("{errors} error(s) reported")]
    Reported { errors: usize },
    /// Written already (a ResourceList with its results): exits as it says.
    #[error("exit {}", .0.code())]
    Answered(Exit),
    #[error("{0}")]
    Live(String),
    /// The cluster refused a call: names the permission the account lacks.
    #[error("forbidden: the account may not {verb} {resource}{} (grant RBAC verb {verb:?} on {resource:?}): {message}", namespace.as_ref().map(|ns| format!(" in namespace {ns:?}")).unwrap_or_default())]
    Forbidden {
        verb: String,
        resource: String,
        namespace: Option<String>,
        message: String,
    },
}

/// The exit codes, by name: the one list, documented in `docs/guarantees.md` and
/// pinned on every face by `tests/friction.rs`
/// (`exit_codes_are_named_once_and_the_same_on_every_face`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done; also when the reader of stdout went away (`| head`).
    Success,
    /// A finding, input that cannot be read or decoded, output that cannot be
    /// written, a refusal or failure of the cluster: the input or the world needs a
    /// change.
    Problem,
    /// A usage or configuration mistake, from a flag or a config file alike: the
    /// command needs a change.
    Usage,
    /// A bug: a panic caught at the face.
    Internal,
}

impl Exit {
    /// Every exit, in the order `docs/guarantees.md` lists them.
    pub const ALL: [Exit; 4] = [Exit::Success, Exit::Problem, Exit::Usage, Exit::Internal];

    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Problem => 1,
            Exit::Usage => 2,
            Exit::Internal => 101,
        }
    }
}

impl Error {
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) | Error::Config(_) => Exit::Usage,
            Error::Answered(exit) => *exit,
            Error::Yaml { .. }
            | Error::Reported { .. }
            | Error::Invalid { .. }
            | Error::Io { .. }
            | Error::Live(_)
            | Error::Forbidden { .. } => Exit::Problem,
        }
    }

    pub fn exit_code(&self) -> i32 {
        self.exit().code()
    }

    pub fn io(file: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            file: file.into(),
            source,
        }
    }

    /// Findings already written: the error carries only the exit status.
    pub fn reported(findings: &[crate::report::Finding]) -> Error {
        Error::Reported {
            errors: findings
                .iter()
                .filter(|f| f.severity == crate::report::Severity::Error)
                .count(),
        }
    }
}

impl From<ReadError> for Error {
    fn from(e: ReadError) -> Error {
        match e {
            ReadError::Yaml { file, doc, source } => Error::Yaml { file, doc, source },
            ReadError::Invalid {
                file,
                doc,
                line,
                message,
            } => Error::Invalid {
                file,
                doc,
                line,
                message,
            },
            ReadError::Io { file, source } => Error::Io { file, source },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
