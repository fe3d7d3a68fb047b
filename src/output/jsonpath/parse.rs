//! client-go's JSONPath parser, step for step (parser.go), so that a template
//! kubectl refuses is refused here and one it reads means the same.

/// One node of a parsed template.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    List(Vec<Node>),
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: String,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    Identifier(String),
}

/// One bound of `[start:end:step]`; `derived` marks the end `[n]` implies.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Param {
    pub value: i64,
    pub known: bool,
    pub derived: bool,
}

struct Parser<'s> {
    input: &'s str,
    pos: usize,
    start: usize,
    width: usize,
}

/// Parses a template: literal text with `{…}` actions.
pub fn parse(text: &str) -> Result<Vec<Node>, String> {
    let mut p = Parser {
        input: text,
        pos: 0,
        start: 0,
        width: 0,
    };
    let mut root = Vec::new();
    loop {
        if p.rest().starts_with('{') {
            if p.pos > p.start {
                root.push(Node::Text(p.consume()));
            }
            p.pos += 1;
            p.consume();
            let mut action = Vec::new();
            p.inside(&mut action)?;
            root.push(Node::List(action));
            continue;
        }
        if p.next().is_none() {
            break;
        }
    }
    if p.pos > p.start {
        root.push(Node::Text(p.consume()));
    }
    Ok(root)
}

/// client-go's parseAction: `text` as the inside of one action.
fn action(text: &str) -> Result<Vec<Node>, String> {
    match parse(&format!("{{{text}}}"))?.into_iter().next() {
        Some(Node::List(nodes)) => Ok(nodes),
        _ => Ok(Vec::new()),
    }
}

fn is_terminator(r: Option<char>) -> bool {
    matches!(
        r,
        None | Some(' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
    )
}

fn is_alphanumeric(r: char) -> bool {
    r == '_' || r.is_alphabetic() || r.is_numeric()
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn consume(&mut self) -> String {
        let v = self.input[self.start..self.pos].to_string();
        self.start = self.pos;
        v
    }

    fn next(&mut self) -> Option<char> {
        match self.rest().chars().next() {
            None => {
                self.width = 0;
                None
            }
            Some(c) => {
                self.width = c.len_utf8();
                self.pos += self.width;
                Some(c)
            }
        }
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    fn peek(&mut self) -> Option<char> {
        let r = self.next();
        self.backup();
        r
    }

    /// The byte two before the position: what client-go checks for a backslash.
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input.as_bytes()[self.pos - 2] == b'\\'
    }

    /// parseInsideAction, as a loop: returns at the action's closing `}`.
    fn inside(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            if self.rest().starts_with('}') {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if self.rest().starts_with("[?(") {
                self.filter(cur)?;
                continue;
            }
            if self.rest().starts_with("..") {
                if cur.last() == Some(&Node::Recursive) {
                    return Err("invalid multiple recursive descent".into());
                }
                self.pos += 2;
                self.consume();
                cur.push(Node::Recursive);
                if self.peek().is_some_and(is_alphanumeric) {
                    self.field(cur);
                }
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".into()),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.array(cur)?,
                Some(q @ ('"' | '\'')) => self.quote(cur, q)?,
                Some('.') => self.field(cur),
                Some(r) if r == '+' || r == '-' || r.is_numeric() => {
                    self.backup();
                    self.number(cur)?;
                }
                Some(r) if is_alphanumeric(r) => {
                    self.backup();
                    self.identifier(cur);
                }
                Some(r) => {
                    return Err(format!(
                        "unrecognized character in action: U+{:04X} {r:?}",
                        r as u32
                    ))
                }
            }
        }
    }

    fn identifier(&mut self, cur: &mut Vec<Node>) {
        while !is_terminator(self.next()) {}
        self.backup();
        let value = self.consume();
        cur.push(match value.as_str() {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            _ => Node::Identifier(value),
        });
    }

    fn number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(r) if r == '.' || r.is_ascii_digit() => {}
                _ => {
                    self.backup();
                    break;
                }
            }
        }
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if let Some(f) = go_float(&value) {
            cur.push(Node::Float(f));
        } else {
            return Err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".into()),
                Some(']') => break,
                _ => {}
            }
        }
        let text = self.consume();
        let mut text = &text[1..text.len() - 1];
        if text == "*" {
            text = ":";
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let mut union = Vec::new();
            for part in parts {
                union.push(action(&format!("[{}]", part.trim_matches(' ')))?);
            }
            cur.push(Node::Union(union));
            return Ok(());
        }
        if let Some(key) = text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .filter(|k| !k.contains('\''))
        {
            cur.extend(action(&format!(".{key}"))?);
            return Ok(());
        }
        cur.push(Node::Array(slice_params(text)?));
        Ok(())
    }

    fn filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        self.pos += 3;
        self.consume();
        let (mut begin, mut end, mut pair) = (false, false, '\0');
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated filter".into()),
                Some(r @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = r;
                        continue;
                    }
                    if !self.escaped() && r == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                _ => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".into());
        }
        let text = self.consume();
        let text = &text[..text.len() - 2];
        cur.push(match split_comparison(text) {
            None => Node::Filter {
                left: action(text)?,
                right: Vec::new(),
                op: "exists".into(),
            },
            Some((l, op, r)) => Node::Filter {
                left: action(l)?,
                right: action(r)?,
                op: op.into(),
            },
        });
        Ok(())
    }

    fn quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".into()),
                Some(r) if r == end && !self.escaped() => break,
                _ => {}
            }
        }
        let value = self.consume();
        let text = unquote(&value[1..value.len() - 1], end)
            .map_err(|e| format!("unquote string {value} error {e}"))?;
        cur.push(Node::Text(text));
        Ok(())
    }

    fn field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            let r = self.next();
            if r == Some('\\') {
                self.next();
            } else if is_terminator(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        cur.push(if value == "*" {
            Node::Wildcard
        } else {
            Node::Field(value.replace('\\', ""))
        });
    }
}

/// Go's ParseFloat on what parseNumber gathers (signs, digits and dots).
fn go_float(text: &str) -> Option<f64> {
    let digits = text.trim_start_matches(['+', '-']);
    let ok = digits.chars().filter(|c| *c == '.').count() <= 1
        && digits.chars().any(|c| c.is_ascii_digit())
        && text.len() - digits.len() <= 1;
    ok.then(|| text.parse().ok()).flatten()
}

/// `^([^!<>=]+)([!<>=]+)(.+?)$`, as Go's regexp matches it.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let i = text.find(is_op)?;
    if i == 0 {
        return None;
    }
    let run = text[i..].find(|c| !is_op(c)).unwrap_or(text.len() - i);
    let run = if i + run == text.len() { run - 1 } else { run };
    if run == 0 {
        return None;
    }
    Some((&text[..i], &text[i..i + run], &text[i + run..]))
}

/// `^(-?\d*)(:-?\d*)?(:-?\d*)?$` and parseArray's reading of its groups.
fn slice_params(text: &str) -> Result<[Param; 3], String> {
    let invalid = || format!("invalid array index {text}");
    let groups: Vec<&str> = text.split(':').collect();
    if groups.len() > 3 {
        return Err(invalid());
    }
    for g in &groups {
        let digits = g.strip_prefix('-').unwrap_or(g);
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
    }
    let mut params = [Param::default(); 3];
    for i in 0..3 {
        match groups.get(i) {
            Some(g) if i > 0 && g.is_empty() => params[i].known = false,
            Some(g) if !g.is_empty() => {
                params[i].known = true;
                params[i].value = g
                    .parse()
                    .map_err(|_| format!("array index {g} is not a number"))?;
            }
            _ if i == 1 => {
                params[1] = Param {
                    value: params[0].value.wrapping_add(1),
                    known: true,
                    derived: true,
                }
            }
            _ => params[i] = Param::default(),
        }
    }
    Ok(params)
}

/// Go's strconv.UnquoteChar loop over a quoted string's inside.
fn unquote(s: &str, quote: char) -> Result<String, String> {
    if !s.contains('\\') && !s.contains(quote) {
        return Ok(s.to_string());
    }
    let syntax = || "invalid syntax".to_string();
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return Err(syntax());
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next().ok_or_else(syntax)?;
        let mut hex = |n: usize| -> Result<u32, String> {
            let h: String = chars.by_ref().take(n).collect();
            if h.len() != n {
                return Err(syntax());
            }
            u32::from_str_radix(&h, 16).map_err(|_| syntax())
        };
        let ch = match e {
            'a' => '\x07',
            'b' => '\x08',
            'f' => '\x0c',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\x0b',
            '\\' => '\\',
            '\'' | '"' if e == quote => e,
            'x' => char::from_u32(hex(2)?).ok_or_else(syntax)?,
            'u' => char::from_u32(hex(4)?).ok_or_else(syntax)?,
            'U' => char::from_u32(hex(8)?).ok_or_else(syntax)?,
            '0'..='7' => {
                let rest: String = chars.by_ref().take(2).collect();
                let v = u32::from_str_radix(&format!("{e}{rest}"), 8).map_err(|_| syntax())?;
                if rest.len() != 2 || v > 255 {
                    return Err(syntax());
                }
                char::from_u32(v).ok_or_else(syntax)?
            }
            _ => return Err(syntax()),
        };
        out.push(ch);
    }
    Ok(out)
}
