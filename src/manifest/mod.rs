//! Reading and writing manifests with scalar fidelity.

pub mod emit;
pub mod node;
pub mod parse;
pub mod place;
pub mod refs;
pub mod scalar;
pub mod splice;

pub use emit::{from_json, node_to_yaml, to_json, to_yaml, YamlWriter};
pub use node::{Node, Scalar, Span, Style, Value};
pub use parse::{attach_text, parse_stream, Document, Edited, ParseError, YamlError};
pub use place::{Location, ResourceRef};
pub mod batch;
pub mod parallel;
pub mod read;
