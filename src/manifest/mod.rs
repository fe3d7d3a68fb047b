//! Reading and writing manifests with scalar fidelity.

pub mod emit;
pub mod node;
pub mod parse;
pub mod scalar;

pub use emit::{from_json, node_to_yaml, to_json, to_yaml, YamlWriter};
pub use node::{Node, Scalar, Style, Value};
pub use parse::{parse_stream, Document, ParseError, YamlError};
pub mod batch;
pub mod parallel;
pub mod read;
