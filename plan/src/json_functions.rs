//! JSON operators and functions over one row's values (`->`, `@>`, `jsonb_set`,
//! `jsonb_build_object`, the element lists that `jsonb_array_elements` and `jsonb_each`
//! unnest, the finishing step of `jsonb_agg`, ...): what each computes. `jsonb` values are
//! `Value::Jsonb`; `json` values are their text (`Value::Text`), read as written. Binding
//! (which function, which result type) is `bind_json`'s.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::expr::text_of;
use sql::jsonb::{array_position, json_level, write_json_string, write_json_value, JsonLevel};
use sql::{DataType, ErrorKind, Jsonb, SqlError, SqlResult, Value};

/// A JSON operator or function. Those that exist for both `json` and `jsonb` evaluate by
/// the value they get; the binder gave them the matching result type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JsonFunc {
    /// `->`: an object's member by key, or an array's element by index.
    Get,
    /// `->>`: the same as text.
    GetText,
    /// `#>`: the value at a path (`text[]`).
    GetPath,
    /// `#>>`: the same as text.
    GetPathText,
    /// `@>` (and `<@` with its sides swapped).
    Contains,
    /// `?`.
    HasKey,
    /// `?|`.
    HasAnyKey,
    /// `?&`.
    HasAllKeys,
    /// `jsonb || jsonb`.
    Concat,
    /// `jsonb - text`, `jsonb - integer`, `jsonb - text[]`.
    Delete,
    /// `#-`.
    DeletePath,
    /// `to_jsonb(x)`.
    ToJsonb,
    /// `to_json(x)`.
    ToJson,
    /// `jsonb_build_object(k, v, ...)`.
    BuildObject,
    /// `jsonb_build_array(...)`, `json_build_array(...)`.
    BuildArray,
    /// `jsonb_typeof`, `json_typeof`.
    TypeOf,
    /// `jsonb_array_length`, `json_array_length`.
    ArrayLength,
    /// `jsonb_set(target, path, value [, create_missing])`.
    Set,
    /// `jsonb_strip_nulls`, `json_strip_nulls`.
    StripNulls,
    /// `jsonb_pretty`.
    Pretty,
    /// An array's elements, as `jsonb[]`/`json[]` (`*_array_elements` unnests them).
    Elements,
    /// An array's elements as text (`*_array_elements_text`).
    ElementsText,
    /// An object's keys (`*_object_keys`, the `key` column of `*_each`).
    Keys,
    /// An object's values (what the `value` column of `*_each` was read from before
    /// `Members`; kept for commands already in logs).
    Values,
    /// An object's values as text (likewise).
    ValuesText,
    /// `jsonb_agg`/`json_agg`'s last step: the aggregated array as one JSON array.
    ArrayOf,
    /// `jsonb_object_agg`/`json_object_agg`'s last step: pairs as one object.
    ObjectOf,
    /// `json_object_agg`'s element: `"key" : value`.
    JsonPair,
    /// `jsonb_agg`/`json_agg`'s element: the value as JSON, NULL as JSON null.
    Element,
    /// `json[b]_to_recordset`'s objects: the array's elements, each one an object.
    Records,
    /// `json[b]_to_record`'s object, as an array of one.
    Record,
    /// A whole row as an object (`row_to_json(t)`, `json_agg(t)`): names and values
    /// alternating, written compactly as json.
    RowObject,
    /// An object's members as two-element arrays `[key, value]` (`*_each` unnests them).
    Members,
}

impl JsonFunc {
    /// Whether a NULL argument still gives a value (the builders take NULL as JSON null).
    pub fn takes_nulls(self) -> bool {
        matches!(
            self,
            JsonFunc::BuildObject
                | JsonFunc::BuildArray
                | JsonFunc::JsonPair
                | JsonFunc::Element
                | JsonFunc::RowObject
        )
    }
}

fn invalid_parameter(message: impl Into<String>) -> SqlError {
    SqlError::new(ErrorKind::InvalidParameterValue, message)
}

/// A `jsonb` value, or `json` text parsed.
fn document(v: &Value) -> SqlResult<Cow<'_, Jsonb>> {
    Ok(match v {
        Value::Jsonb(j) => Cow::Borrowed(j),
        Value::Text(text) => Cow::Owned(Jsonb::parse(text)?),
        other => Cow::Owned(Jsonb::from_value(other, other.natural_type())),
    })
}

fn jsonb(j: Jsonb) -> Value {
    Value::Jsonb(Box::new(j))
}

/// A `text[]` argument's elements; a NULL element is an error named by `what`.
fn texts(v: &Value, what: &str) -> SqlResult<Vec<String>> {
    match v {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(n, i)| match i {
                Value::Null => Err(SqlError::new(
                    ErrorKind::NullValueNotAllowed,
                    format!("{what} at position {} is null", n + 1),
                )),
                other => Ok(text_of(other)),
            })
            .collect(),
        other => Ok(vec![text_of(other)]),
    }
}

/// One step into `json` text: a member (the last of its name) or an element.
fn json_step<'t>(text: &'t str, step: &Value) -> SqlResult<Option<&'t str>> {
    Ok(match (json_level(text)?, step) {
        (JsonLevel::Object(members), Value::Text(key)) => members
            .into_iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v),
        (JsonLevel::Array(items), Value::Int(i)) => {
            array_position(items.len(), *i).map(|at| items[at])
        }
        _ => None,
    })
}

/// `json` text as `->>` gives it: a string's contents, NULL for null, else the text.
fn json_as_text(text: &str) -> SqlResult<Value> {
    Ok(match text.trim_start().as_bytes().first() {
        Some(b'"') | Some(b'n') => match Jsonb::parse(text)? {
            Jsonb::String(s) => Value::Text(s),
            Jsonb::Null => Value::Null,
            other => Value::Text(other.to_text()),
        },
        _ => Value::Text(text.to_string()),
    })
}

fn jsonb_as_text(j: Option<&Jsonb>) -> Value {
    j.and_then(Jsonb::as_text).map_or(Value::Null, Value::Text)
}

/// `*_array_elements` of something that is not an array (`found`: "an object").
fn no_elements(found: &str) -> SqlError {
    invalid_parameter(format!("cannot extract elements from {found}"))
}

/// `function` (keys or members) of something that is not an object.
fn not_an_object(function: &str, found: &str) -> SqlError {
    invalid_parameter(format!("cannot call {function} on {found}"))
}

/// JSON text: `open`, the items each written by `write` with `between` them, `close`.
fn json_text<T>(
    open: &str,
    items: impl IntoIterator<Item = T>,
    between: &str,
    close: &str,
    mut write: impl FnMut(T, &mut String),
) -> Value {
    let mut out = String::from(open);
    for (n, item) in items.into_iter().enumerate() {
        if n > 0 {
            out.push_str(between);
        }
        write(item, &mut out);
    }
    out.push_str(close);
    Value::Text(out)
}

fn article(type_name: &str) -> String {
    match type_name {
        "object" | "array" => format!("an {type_name}"),
        _ => "a scalar".into(),
    }
}

/// Evaluates `func` over `values`, whose expressions have `types` (a `json` value is text
/// that goes into JSON as written), to a value of type `ty`.
pub fn eval(
    func: JsonFunc,
    values: &[Value],
    types: &[DataType],
    ty: DataType,
) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).unwrap_or(&Value::Null);
    let type_of = |i: usize| match types.get(i) {
        Some(DataType::Unknown) | None => arg(i).natural_type(),
        Some(t) => *t,
    };
    let json_result = ty == DataType::Json || ty == DataType::JsonArray;
    Ok(match func {
        JsonFunc::Get | JsonFunc::GetText => match arg(0) {
            Value::Text(text) => match json_step(text, arg(1))? {
                None => Value::Null,
                Some(found) if func == JsonFunc::Get => Value::Text(found.to_string()),
                Some(found) => json_as_text(found)?,
            },
            other => {
                let doc = document(other)?;
                let found = match arg(1) {
                    Value::Int(i) => doc.get_index(*i),
                    key => doc.get_key(&text_of(key)),
                };
                match func {
                    JsonFunc::Get => found.map_or(Value::Null, |j| jsonb(j.clone())),
                    _ => jsonb_as_text(found),
                }
            }
        },
        JsonFunc::GetPath | JsonFunc::GetPathText => {
            let path = match arg(1) {
                Value::Array(items) if items.iter().any(Value::is_null) => return Ok(Value::Null),
                other => texts(other, "path element")?,
            };
            match arg(0) {
                Value::Text(text) => {
                    let mut at: &str = text;
                    for step in &path {
                        let step = match step.trim().parse::<i64>() {
                            Ok(i) if matches!(json_level(at)?, JsonLevel::Array(_)) => {
                                Value::Int(i)
                            }
                            _ => Value::Text(step.clone()),
                        };
                        match json_step(at, &step)? {
                            Some(next) => at = next,
                            None => return Ok(Value::Null),
                        }
                    }
                    if func == JsonFunc::GetPath {
                        Value::Text(at.trim().to_string())
                    } else {
                        json_as_text(at)?
                    }
                }
                other => {
                    let doc = document(other)?;
                    let found = doc.get_path(&path);
                    match func {
                        JsonFunc::GetPath => found.map_or(Value::Null, |j| jsonb(j.clone())),
                        _ => jsonb_as_text(found),
                    }
                }
            }
        }
        JsonFunc::Contains => Value::Bool(document(arg(0))?.contains(&*document(arg(1))?)),
        JsonFunc::HasKey => Value::Bool(document(arg(0))?.has_key(&text_of(arg(1)))),
        JsonFunc::HasAnyKey | JsonFunc::HasAllKeys => {
            let doc = document(arg(0))?;
            let keys = match arg(1) {
                Value::Array(items) => items.iter().filter(|i| !i.is_null()).map(text_of).collect(),
                other => vec![text_of(other)],
            };
            Value::Bool(if func == JsonFunc::HasAnyKey {
                keys.iter().any(|k| doc.has_key(k))
            } else {
                keys.iter().all(|k| doc.has_key(k))
            })
        }
        JsonFunc::Concat => jsonb(
            document(arg(0))?
                .into_owned()
                .concat(document(arg(1))?.into_owned()),
        ),
        JsonFunc::Delete => {
            let doc = document(arg(0))?.into_owned();
            jsonb(match arg(1) {
                Value::Int(i) => doc.delete_index(*i)?,
                Value::Array(keys) => keys
                    .iter()
                    .filter(|k| !k.is_null())
                    .try_fold(doc, |d, k| d.delete_key(&text_of(k)))?,
                key => doc.delete_key(&text_of(key))?,
            })
        }
        JsonFunc::DeletePath => jsonb(
            document(arg(0))?
                .into_owned()
                .delete_path(&texts(arg(1), "path element")?)?,
        ),
        JsonFunc::ToJsonb => jsonb(Jsonb::from_value(arg(0), type_of(0))),
        JsonFunc::Element if !json_result => jsonb(Jsonb::from_value(arg(0), type_of(0))),
        JsonFunc::ToJson | JsonFunc::Element => {
            let mut out = String::new();
            write_json_value(arg(0), type_of(0), &mut out);
            Value::Text(out)
        }
        JsonFunc::BuildObject | JsonFunc::RowObject => {
            for (n, key) in values.iter().step_by(2).enumerate() {
                if key.is_null() {
                    return Err(invalid_parameter(format!(
                        "argument {}: key must not be null",
                        2 * n + 1
                    )));
                }
            }
            if json_result {
                // A row is written compactly, json_build_object's pairs with spaces.
                let (between, colon) = match func {
                    JsonFunc::RowObject => (",", ":"),
                    _ => (", ", " : "),
                };
                json_text("{", (0..values.len()).step_by(2), between, "}", |n, out| {
                    write_json_string(&text_of(arg(n)), out);
                    out.push_str(colon);
                    write_json_value(arg(n + 1), type_of(n + 1), out);
                })
            } else {
                let pairs = (0..values.len())
                    .step_by(2)
                    .map(|n| {
                        (
                            text_of(arg(n)),
                            Jsonb::from_value(arg(n + 1), type_of(n + 1)),
                        )
                    })
                    .collect();
                jsonb(Jsonb::object(pairs))
            }
        }
        JsonFunc::BuildArray if json_result => {
            json_text("[", 0..values.len(), ", ", "]", |n, out| {
                write_json_value(arg(n), type_of(n), out)
            })
        }
        JsonFunc::BuildArray => jsonb(Jsonb::Array(
            (0..values.len())
                .map(|n| Jsonb::from_value(arg(n), type_of(n)))
                .collect(),
        )),
        JsonFunc::TypeOf => Value::Text(document(arg(0))?.type_name().into()),
        JsonFunc::ArrayLength => match &*document(arg(0))? {
            Jsonb::Array(items) => Value::Int(items.len() as i64),
            Jsonb::Object(_) => {
                return Err(invalid_parameter("cannot get array length of a non-array"))
            }
            _ => return Err(invalid_parameter("cannot get array length of a scalar")),
        },
        JsonFunc::Set => {
            let create = !matches!(arg(3), Value::Bool(false));
            let new = document(arg(2))?.into_owned();
            jsonb(document(arg(0))?.into_owned().set_path(
                &texts(arg(1), "path element")?,
                new,
                create,
            )?)
        }
        JsonFunc::StripNulls => {
            let stripped = document(arg(0))?.into_owned().strip_nulls();
            if json_result {
                Value::Text(stripped.to_text())
            } else {
                jsonb(stripped)
            }
        }
        JsonFunc::Pretty => Value::Text(document(arg(0))?.pretty()),
        JsonFunc::Elements | JsonFunc::ElementsText => match arg(0) {
            Value::Text(text) => match json_level(text)? {
                JsonLevel::Array(items) => Value::Array(
                    items
                        .into_iter()
                        .map(|i| {
                            if func == JsonFunc::Elements {
                                Ok(Value::Text(i.to_string()))
                            } else {
                                json_as_text(i)
                            }
                        })
                        .collect::<SqlResult<_>>()?,
                ),
                JsonLevel::Object(_) => return Err(no_elements("an object")),
                JsonLevel::Scalar(_) => return Err(no_elements("a scalar")),
            },
            other => match document(other)?.into_owned() {
                Jsonb::Array(items) => Value::Array(
                    items
                        .into_iter()
                        .map(|i| match func {
                            JsonFunc::Elements => jsonb(i),
                            _ => jsonb_as_text(Some(&i)),
                        })
                        .collect(),
                ),
                j => return Err(no_elements(&article(j.type_name()))),
            },
        },
        JsonFunc::Records | JsonFunc::Record => {
            let prefix = if matches!(arg(0), Value::Text(_)) {
                "json"
            } else {
                "jsonb"
            };
            let not_objects = || {
                invalid_parameter(format!(
                    "argument of {prefix}_to_recordset must be an array of objects"
                ))
            };
            match (func, arg(0)) {
                (JsonFunc::Records, Value::Text(text)) => match json_level(text)? {
                    JsonLevel::Array(items) => Value::Array(
                        items
                            .into_iter()
                            .map(|i| {
                                if i.starts_with('{') {
                                    Ok(Value::Text(i.to_string()))
                                } else {
                                    Err(not_objects())
                                }
                            })
                            .collect::<SqlResult<_>>()?,
                    ),
                    _ => {
                        return Err(invalid_parameter(format!(
                            "cannot call {prefix}_to_recordset on a non-array"
                        )))
                    }
                },
                (JsonFunc::Records, other) => match document(other)?.into_owned() {
                    Jsonb::Array(items) => Value::Array(
                        items
                            .into_iter()
                            .map(|i| match i {
                                Jsonb::Object(_) => Ok(jsonb(i)),
                                _ => Err(not_objects()),
                            })
                            .collect::<SqlResult<_>>()?,
                    ),
                    _ => {
                        return Err(invalid_parameter(format!(
                            "cannot call {prefix}_to_recordset on a non-array"
                        )))
                    }
                },
                (_, doc) => match document(doc)?.type_name() {
                    "object" => Value::Array(vec![doc.clone()]),
                    other => {
                        return Err(invalid_parameter(format!(
                            "cannot call populate_composite on {}",
                            article(other)
                        )))
                    }
                },
            }
        }
        JsonFunc::Keys | JsonFunc::Values | JsonFunc::ValuesText | JsonFunc::Members => {
            let function = match (func, json_result || matches!(arg(0), Value::Text(_))) {
                (JsonFunc::Keys, false) => "jsonb_object_keys",
                (JsonFunc::Keys, true) => "json_object_keys",
                (_, false) => "jsonb_each",
                (_, true) => "json_each",
            };
            match arg(0) {
                Value::Text(text) => match json_level(text)? {
                    JsonLevel::Object(members) => Value::Array(
                        members
                            .into_iter()
                            .map(|(k, v)| match func {
                                JsonFunc::Keys => Ok(Value::Text(k)),
                                JsonFunc::Values => Ok(Value::Text(v.to_string())),
                                JsonFunc::Members => {
                                    let mut pair = String::from("[");
                                    write_json_string(&k, &mut pair);
                                    pair.push_str(", ");
                                    pair.push_str(v);
                                    pair.push(']');
                                    Ok(Value::Text(pair))
                                }
                                _ => json_as_text(v),
                            })
                            .collect::<SqlResult<_>>()?,
                    ),
                    JsonLevel::Array(_) => return Err(not_an_object(function, "an array")),
                    JsonLevel::Scalar(_) => return Err(not_an_object(function, "a scalar")),
                },
                other => match document(other)?.into_owned() {
                    Jsonb::Object(pairs) => Value::Array(
                        pairs
                            .into_iter()
                            .map(|(k, v)| match func {
                                JsonFunc::Keys => Value::Text(k),
                                JsonFunc::Values => jsonb(v),
                                JsonFunc::Members => jsonb(Jsonb::Array(vec![Jsonb::String(k), v])),
                                _ => jsonb_as_text(Some(&v)),
                            })
                            .collect(),
                    ),
                    j => return Err(not_an_object(function, &article(j.type_name()))),
                },
            }
        }
        // Filtered-out rows are NULL elements; when no row is left there is no value.
        JsonFunc::ArrayOf | JsonFunc::ObjectOf if !matches!(arg(0), Value::Array(items) if items.iter().any(|i| !i.is_null())) => {
            Value::Null
        }
        JsonFunc::ArrayOf => match arg(0) {
            Value::Array(items) if json_result => {
                let between = if arg(1).is_true() { ", \n " } else { ", " };
                let items = items.iter().filter(|i| !i.is_null());
                json_text("[", items, between, "]", |item, out| {
                    write_json_value(item, DataType::Json, out)
                })
            }
            Value::Array(items) => jsonb(Jsonb::Array(
                items
                    .iter()
                    .filter(|i| !i.is_null())
                    .map(|i| Jsonb::from_value(i, DataType::Jsonb))
                    .collect(),
            )),
            _ => Value::Null,
        },
        JsonFunc::ObjectOf => match arg(0) {
            Value::Array(items) if json_result => {
                let pairs = items.iter().filter(|i| !i.is_null());
                json_text("{ ", pairs, ", ", " }", |pair, out| {
                    out.push_str(&text_of(pair))
                })
            }
            Value::Array(items) => {
                let mut pairs = Vec::with_capacity(items.len());
                for item in items {
                    let Value::Jsonb(pair) = item else { continue };
                    let Jsonb::Array(kv) = pair.as_ref() else {
                        continue;
                    };
                    match kv.as_slice() {
                        [Jsonb::String(k), v] => pairs.push((k.clone(), v.clone())),
                        _ => return Err(invalid_parameter("field name must not be null")),
                    }
                }
                jsonb(Jsonb::object(pairs))
            }
            _ => Value::Null,
        },
        JsonFunc::JsonPair => {
            if arg(0).is_null() {
                return Err(invalid_parameter("field name must not be null"));
            }
            let mut out = String::new();
            write_json_string(&text_of(arg(0)), &mut out);
            out.push_str(" : ");
            write_json_value(arg(1), type_of(1), &mut out);
            Value::Text(out)
        }
    })
}
