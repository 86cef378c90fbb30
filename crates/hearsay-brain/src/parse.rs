//! Turning a model's answer into a [`Decision`]: robust about the wrapping (code fences,
//! prose around the object, trailing commas, which are repaired and counted), strict about
//! the content (unknown actions and missing fields become `stay` and are counted as
//! rejections; targets are clamped to the map and speech is capped, both counted as
//! repairs; a `to` naming nobody within reach makes a plain talk, counted as an
//! [`ADDRESSEE_REPAIR`]).

use hearsay_core::memory::REFLECTION_IMPORTANCE;
use hearsay_core::{Decision, Grid, Insight, MemoryId, Observation, Pos};
use serde_json::{Map, Value};

/// A parsed answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// What the NPC will do.
    pub decision: Decision,
    /// What had to be fixed to get there.
    pub repairs: Vec<String>,
    /// What was refused (the decision is then `stay`).
    pub rejections: Vec<String>,
}

/// Why no decision could be read at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// There is no `{` in the answer.
    #[error("no JSON object in the answer")]
    NoObject,
    /// The object never closes (the answer was cut off).
    #[error("the JSON object is cut off")]
    Truncated,
    /// The object is not JSON, even after repairs.
    #[error("not valid JSON: {0}")]
    Invalid(String),
}

/// How every repair of a talk's or whisper's `to` begins (`addressee "Zed" is nobody in
/// earshot; a plain talk`), so the summary can count them apart from the others.
pub const ADDRESSEE_REPAIR: &str = "addressee";

/// Reads a decision from `text` for the NPC that perceived `obs`: a move to where it
/// stands is a stay; a talk's `to` must name an NPC it sees within earshot, a whisper's
/// one within a whisper's reach ([`Pos::within_whisper`]), or the answer becomes a plain
/// talk.
pub fn parse_decision(
    text: &str,
    grid: Grid,
    obs: &Observation,
    speech_max: usize,
) -> Result<Parsed, ParseError> {
    let (map, mut repairs) = extract_object(text)?;
    let mut rejections = Vec::new();
    let decision = interpret(&map, grid, obs, speech_max, &mut repairs, &mut rejections);
    Ok(Parsed {
        decision,
        repairs,
        rejections,
    })
}

/// Parsed insights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedInsights {
    /// The valid insights, in answer order, at most the maximum asked for.
    pub insights: Vec<Insight>,
    /// What had to be fixed.
    pub repairs: Vec<String>,
    /// Why parts of the answer were refused, one line each.
    pub rejections: Vec<String>,
}

/// Reads a reflection's insights from `text`: `{"insights": [{"text", "importance",
/// "evidence"}]}`. Strict about the content: evidence may only cite `shown` memories
/// (others are dropped), importance is 1–10 (default [`REFLECTION_IMPORTANCE`]), text
/// is capped at `text_max` characters, at most `max` insights are kept; an insight
/// without text is rejected.
pub fn parse_insights(
    text: &str,
    shown: &[MemoryId],
    max: usize,
    text_max: usize,
) -> Result<ParsedInsights, ParseError> {
    let (map, mut repairs) = extract_object(text)?;
    let mut rejections = Vec::new();
    let Some(items) = map.get("insights").and_then(Value::as_array) else {
        rejections.push("no insights array".to_owned());
        return Ok(ParsedInsights {
            insights: Vec::new(),
            repairs,
            rejections,
        });
    };
    let mut insights = Vec::new();
    for item in items {
        let Some(obj) = item.as_object() else {
            rejections.push("an insight that is not an object".to_owned());
            continue;
        };
        let content = obj.get("text").and_then(Value::as_str).unwrap_or("").trim();
        if content.is_empty() {
            rejections.push("an insight without text".to_owned());
            continue;
        }
        if insights.len() == max {
            repairs.push(format!("insights beyond {max} dropped"));
            break;
        }
        let count = content.chars().count();
        let content: String = if count > text_max {
            repairs.push(format!(
                "insight capped from {count} to {text_max} characters"
            ));
            content.chars().take(text_max).collect()
        } else {
            content.to_owned()
        };
        let importance = match obj.get("importance").and_then(Value::as_i64) {
            Some(i) if (1..=10).contains(&i) => i as u8,
            Some(i) => {
                repairs.push(format!("importance {i} clamped to 1–10"));
                i.clamp(1, 10) as u8
            }
            None => {
                repairs.push(format!("importance missing: {REFLECTION_IMPORTANCE}"));
                REFLECTION_IMPORTANCE
            }
        };
        let mut evidence = Vec::new();
        for v in obj
            .get("evidence")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match v.as_u64().map(MemoryId) {
                Some(id) if shown.contains(&id) => {
                    if !evidence.contains(&id) {
                        evidence.push(id);
                    }
                }
                _ => {
                    let v: String = v.to_string().chars().take(24).collect();
                    repairs.push(format!("evidence {v} is not a memory shown; dropped"));
                }
            }
        }
        insights.push(Insight {
            content,
            importance,
            evidence,
        });
    }
    Ok(ParsedInsights {
        insights,
        repairs,
        rejections,
    })
}

/// The JSON object in a model's answer, unwrapped from code fences and prose and with
/// trailing commas removed (each repair named).
fn extract_object(text: &str) -> Result<(Map<String, Value>, Vec<String>), ParseError> {
    let mut repairs = Vec::new();
    let mut body = text.trim();
    if body.starts_with("```") {
        repairs.push("code fence".to_owned());
        body = body.trim_start_matches('`');
        // Drop the language tag line (```json).
        body = body.split_once('\n').map_or("", |(_, rest)| rest);
        body = body.trim_end().trim_end_matches('`');
    }
    let start = body.find('{').ok_or(ParseError::NoObject)?;
    let end = object_end(&body[start..]).ok_or(ParseError::Truncated)? + start;
    if !body[..start].trim().is_empty() || !body[end + 1..].trim().is_empty() {
        repairs.push("prose around the object".to_owned());
    }
    let object = &body[start..=end];
    let value: Value = match serde_json::from_str(object) {
        Ok(v) => v,
        Err(first) => {
            let fixed = strip_trailing_commas(object);
            match serde_json::from_str(&fixed) {
                Ok(v) => {
                    repairs.push("trailing comma".to_owned());
                    v
                }
                Err(_) => return Err(ParseError::Invalid(first.to_string())),
            }
        }
    };
    let Value::Object(map) = value else {
        return Err(ParseError::Invalid("not an object".into()));
    };
    Ok((map, repairs))
}

fn interpret(
    map: &Map<String, Value>,
    grid: Grid,
    obs: &Observation,
    speech_max: usize,
    repairs: &mut Vec<String>,
    rejections: &mut Vec<String>,
) -> Decision {
    let at = obs.at;
    let action = map
        .get("action")
        .and_then(Value::as_str)
        .map(|a| a.trim().to_lowercase());
    match action.as_deref() {
        Some(kind @ ("talk" | "whisper")) => {
            let speech = map
                .get("speech")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            if speech.is_empty() {
                rejections.push(format!("{kind} without speech"));
                return Decision::Stay;
            }
            let count = speech.chars().count();
            let speech = if count > speech_max {
                repairs.push(format!(
                    "speech capped from {count} to {speech_max} characters"
                ));
                speech.chars().take(speech_max).collect()
            } else {
                speech.to_owned()
            };
            addressed(speech, kind == "whisper", map.get("to"), obs, repairs)
        }
        Some("move") => {
            let Some(target) = target(map) else {
                rejections.push("move without an integer x and y".to_owned());
                return Decision::Stay;
            };
            let clamped = grid.clamp(target);
            if clamped != target {
                repairs.push(format!("target {target} clamped to {clamped}"));
            }
            if clamped == at {
                Decision::Stay
            } else {
                Decision::Move { to: clamped }
            }
        }
        Some("stay") => Decision::Stay,
        Some(other) => {
            let other: String = other.chars().take(40).collect();
            rejections.push(format!("unknown action {other:?}"));
            Decision::Stay
        }
        None => {
            rejections.push("no action".to_owned());
            Decision::Stay
        }
    }
}

/// A talk or whisper of `speech` to the NPC `to` names, if it is one `obs` shows within
/// reach: earshot for a talk, [`Pos::within_whisper`] for a whisper. Anything else — a
/// name nobody in sight has, someone out of reach, a whisper to nobody, a `to` that is not
/// a string — makes a plain talk and an [`ADDRESSEE_REPAIR`]. `null` and `""` address
/// nobody (a plain talk, no repair) — the strict schema makes every answer carry `to`.
fn addressed(
    speech: String,
    whisper: bool,
    to: Option<&Value>,
    obs: &Observation,
    repairs: &mut Vec<String>,
) -> Decision {
    let plain = |repairs: &mut Vec<String>, why: String| {
        repairs.push(format!("{ADDRESSEE_REPAIR} {why}; a plain talk"));
        Decision::Talk {
            speech: speech.clone(),
            to: None,
        }
    };
    let name = match to {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.trim()),
        Some(other) => {
            let shown: String = other.to_string().chars().take(24).collect();
            return plain(repairs, format!("{shown} is not a name"));
        }
    };
    let Some(name) = name else {
        if whisper {
            return plain(repairs, "missing from a whisper".to_owned());
        }
        return Decision::Talk { speech, to: None };
    };
    let shown: String = name.chars().take(40).collect();
    let Some(seen) = obs.seen_npcs.iter().find(|s| &*s.name == name) else {
        return plain(repairs, format!("{shown:?} is nobody in sight"));
    };
    if whisper {
        if !obs.at.within_whisper(seen.at) {
            return plain(repairs, format!("{shown:?} is beyond a whisper's reach"));
        }
        return Decision::Whisper {
            speech,
            to: seen.id,
        };
    }
    if !seen.audible {
        return plain(repairs, format!("{shown:?} is out of earshot"));
    }
    Decision::Talk {
        speech,
        to: Some(seen.id),
    }
}

fn integer(v: &Value) -> Option<i32> {
    let n = match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    Some(n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
}

fn target(map: &Map<String, Value>) -> Option<Pos> {
    if let (Some(x), Some(y)) = (
        map.get("x").and_then(integer),
        map.get("y").and_then(integer),
    ) {
        return Some(Pos::new(x, y));
    }
    let to = map.get("to")?.as_array()?;
    match to.as_slice() {
        [x, y] => Some(Pos::new(integer(x)?, integer(y)?)),
        _ => None,
    }
}

/// Byte index of the `}` closing the object that starts at byte 0, strings respected.
fn object_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Removes commas that directly precede `}` or `]` (outside strings).
fn strip_trailing_commas(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            out.push(c);
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: Grid = Grid {
        width: 24,
        height: 16,
    };
    const AT: Pos = Pos::new(5, 5);

    /// Alice at (5, 5) sees Carol next to her, Dave two cells off (both in earshot) and
    /// Far out of earshot.
    fn obs() -> Observation {
        let seen = |id, name: &str, x, y, audible| hearsay_core::SeenNpc {
            id: hearsay_core::NpcId(id),
            name: name.into(),
            at: Pos::new(x, y),
            audible,
        };
        Observation {
            npc: hearsay_core::NpcId(0),
            name: "Alice".into(),
            tick: 3,
            at: AT,
            target: None,
            seen_npcs: vec![
                seen(1, "Carol", 6, 6, true),
                seen(2, "Dave", 7, 7, true),
                seen(3, "Far", 11, 5, false),
            ],
            seen_places: vec![],
            heard: vec![],
            witnessed: vec![],
            recent: Default::default(),
            known_by: vec![],
        }
    }

    fn parse(text: &str) -> Result<Parsed, ParseError> {
        parse_decision(text, GRID, &obs(), 20)
    }

    #[test]
    fn talk_may_address_someone_in_earshot_and_whisper_to_a_neighbour() {
        use hearsay_core::NpcId;
        let talk = |to| Decision::Talk {
            speech: "Fish!".into(),
            to,
        };
        let ok = [
            (
                r#"{"action":"talk","speech":"Fish!","to":"Dave","x":5,"y":5}"#,
                talk(Some(NpcId(2))),
            ),
            (
                r#"{"action":"talk","speech":"Fish!","to":null,"x":5,"y":5}"#,
                talk(None),
            ),
            (
                r#"{"action":"talk","speech":"Fish!","to":"","x":5,"y":5}"#,
                talk(None),
            ),
            (r#"{"action":"talk","speech":"Fish!"}"#, talk(None)),
            (
                r#"{"action":"Whisper","speech":"Fish!","to":" Carol ","x":5,"y":5}"#,
                Decision::Whisper {
                    speech: "Fish!".into(),
                    to: NpcId(1),
                },
            ),
        ];
        for (answer, expected) in ok {
            let p = parse(answer).expect("parses");
            assert_eq!((&p.decision, p.repairs.len()), (&expected, 0), "{answer}");
        }
        let repaired = [
            (
                r#"{"action":"talk","speech":"Fish!","to":"Zed"}"#,
                "addressee \"Zed\" is nobody in sight; a plain talk",
            ),
            (
                r#"{"action":"talk","speech":"Fish!","to":"Far"}"#,
                "addressee \"Far\" is out of earshot; a plain talk",
            ),
            (
                r#"{"action":"talk","speech":"Fish!","to":[1,2]}"#,
                "addressee [1,2] is not a name; a plain talk",
            ),
            (
                r#"{"action":"whisper","speech":"Fish!","to":"Dave"}"#,
                "addressee \"Dave\" is beyond a whisper's reach; a plain talk",
            ),
            (
                r#"{"action":"whisper","speech":"Fish!","to":"Far"}"#,
                "addressee \"Far\" is beyond a whisper's reach; a plain talk",
            ),
            (
                r#"{"action":"whisper","speech":"Fish!","to":null}"#,
                "addressee missing from a whisper; a plain talk",
            ),
            (
                r#"{"action":"whisper","speech":"Fish!","to":"Alice"}"#,
                "addressee \"Alice\" is nobody in sight; a plain talk",
            ),
        ];
        for (answer, why) in repaired {
            let p = parse(answer).expect("parses");
            assert_eq!(p.decision, talk(None), "{answer}");
            assert_eq!(p.repairs, vec![why.to_owned()], "{answer}");
            assert!(p.repairs[0].starts_with(ADDRESSEE_REPAIR));
        }
        let p = parse(r#"{"action":"whisper","speech":" ","to":"Carol"}"#).expect("parses");
        assert_eq!(p.decision, Decision::Stay);
        assert_eq!(p.rejections, vec!["whisper without speech"]);
    }

    fn decision(text: &str) -> Decision {
        parse(text).expect("parses").decision
    }

    #[test]
    fn clean_answers() {
        assert_eq!(
            decision(r#"{"action":"stay","speech":"","x":5,"y":5}"#),
            Decision::Stay
        );
        assert_eq!(
            decision(r#"{"action":"talk","speech":"Fresh fish!","x":5,"y":5}"#),
            Decision::Talk {
                speech: "Fresh fish!".into(),
                to: None
            }
        );
        assert_eq!(
            decision(r#"{"action":"move","speech":"","x":7,"y":2}"#),
            Decision::Move { to: Pos::new(7, 2) }
        );
        assert_eq!(
            decision(r#"{"action":"MOVE","to":[7,2]}"#),
            Decision::Move { to: Pos::new(7, 2) }
        );
        assert!(
            parse(r#"{"action":"stay"}"#)
                .expect("ok")
                .repairs
                .is_empty()
        );
    }

    #[test]
    fn wrappings_are_repaired_and_counted() {
        let p = parse("```json\n{\"action\": \"move\", \"x\": 1, \"y\": 2}\n```").expect("fenced");
        assert_eq!(p.decision, Decision::Move { to: Pos::new(1, 2) });
        assert_eq!(p.repairs, vec!["code fence"]);
        let p = parse("Sure! Here is my decision: {\"action\": \"stay\"} Hope that helps.")
            .expect("prose");
        assert_eq!(p.repairs, vec!["prose around the object"]);
        let p = parse("{\"action\": \"move\", \"to\": [1, 2,], }").expect("commas");
        assert_eq!(p.decision, Decision::Move { to: Pos::new(1, 2) });
        assert_eq!(p.repairs, vec!["trailing comma"]);
        let p =
            parse(r#"{"action":"talk","speech":"a, } odd { \" str",}"#).expect("strings respected");
        assert_eq!(
            p.decision,
            Decision::Talk {
                speech: "a, } odd { \" str".into(),
                to: None,
            }
        );
    }

    #[test]
    fn content_is_validated_strictly() {
        let p = parse(r#"{"action":"fly","x":3,"y":3}"#).expect("parses");
        assert_eq!(
            (p.decision, p.rejections),
            (Decision::Stay, vec!["unknown action \"fly\"".to_owned()])
        );
        let p = parse(r#"{"action":"talk","speech":"   "}"#).expect("parses");
        assert_eq!((p.decision, p.rejections.len()), (Decision::Stay, 1));
        let p = parse(r#"{"action":"move","x":"far"}"#).expect("parses");
        assert_eq!((p.decision, p.rejections.len()), (Decision::Stay, 1));
        let p = parse(r#"{"speech":"hi"}"#).expect("parses");
        assert_eq!(p.rejections, vec!["no action"]);
        let p = parse(r#"{"action":"move","x":-40,"y":999}"#).expect("parses");
        assert_eq!(
            p.decision,
            Decision::Move {
                to: Pos::new(0, 15)
            }
        );
        assert_eq!(p.repairs, vec!["target (-40, 999) clamped to (0, 15)"]);
        let p = parse(&format!(
            r#"{{"action":"talk","speech":"{}"}}"#,
            "鱼".repeat(50)
        ))
        .expect("parses");
        assert_eq!(
            p.decision,
            Decision::Talk {
                speech: "鱼".repeat(20),
                to: None
            }
        );
        assert_eq!(p.repairs.len(), 1);
        assert_eq!(
            decision(r#"{"action":"move","x":5,"y":5}"#),
            Decision::Stay,
            "a move to here is a stay"
        );
    }

    #[test]
    fn hopeless_answers_are_errors() {
        assert_eq!(parse("I would like to stay."), Err(ParseError::NoObject));
        assert_eq!(
            parse(r#"{"action":"talk","speech":"The market is sel"#),
            Err(ParseError::Truncated)
        );
        assert!(matches!(
            parse("{action: stay}"),
            Err(ParseError::Invalid(_))
        ));
        assert!(parse("{} }").is_ok());
        assert_eq!(parse(""), Err(ParseError::NoObject));
        assert_eq!(parse("}}}{"), Err(ParseError::Truncated));
    }

    #[test]
    fn insights_are_read_strictly() {
        let shown = [MemoryId(3), MemoryId(7)];
        let text = r#"Sure! ```json
{"insights": [
  {"text": "Fresh fish is the talk of the town.", "importance": 8, "evidence": [7, 3, 7, 99, "x"]},
  {"text": "", "importance": 5, "evidence": []},
  {"text": "Bob knows the market.", "importance": 42, "evidence": [3]},
  {"text": "No importance here.", "evidence": [3]},
  {"text": "One too many.", "importance": 5, "evidence": []},
]}
```"#;
        let parsed = parse_insights(text, &shown, 3, 20).expect("parsed");
        let got: Vec<(&str, u8, Vec<u64>)> = parsed
            .insights
            .iter()
            .map(|i| {
                (
                    i.content.as_str(),
                    i.importance,
                    i.evidence.iter().map(|e| e.0).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("Fresh fish is the ta", 8, vec![7, 3]),
                ("Bob knows the market", 10, vec![3]),
                ("No importance here.", REFLECTION_IMPORTANCE, vec![3]),
            ]
        );
        assert_eq!(parsed.rejections, vec!["an insight without text"]);
        let repairs = parsed.repairs.join("; ");
        for want in [
            "prose around the object",
            "trailing comma",
            "evidence 99 is not a memory shown",
            "importance 42 clamped",
            "importance missing",
            "insights beyond 3 dropped",
            "capped",
        ] {
            assert!(repairs.contains(want), "{want}: {repairs}");
        }
        assert_eq!(
            parse_insights(r#"{"thoughts": []}"#, &shown, 3, 20)
                .expect("parsed")
                .rejections,
            vec!["no insights array"]
        );
        assert!(parse_insights("no json", &shown, 3, 20).is_err());
    }
}
