//! The one error type of the library, with the exit code each kind maps to.

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

impl Error {
    /// 1 for problems in the input or the cluster, 2 for usage and I/O (the
    /// convention of linters that pre-commit and CI understand).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Io { .. } => 2,
            _ => 1,
        }
    }

    pub fn io(file: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            file: file.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
