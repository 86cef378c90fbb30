//! Prompts that fit the model's context. A small local context (llama.cpp's `-c 2048
//! -np 4` gives each slot 512 tokens) overflows on a crowded tick; a server then refuses
//! the request or cuts it. So every prompt is counted before it is sent and, when prompt
//! plus `max_tokens` would not fit, trimmed in a fixed order ([`TRIMS`]) — never the
//! persona, the position, what was heard this tick or the answer format.
//!
//! Counting, best first ([`TokenCounter`]): the server's own tokenizer and chat template
//! (llama.cpp's `POST /v1/chat/completions/input_tokens`); tiktoken's encoding for an
//! OpenAI-family model; else the UTF-8 bytes of the messages and the schema plus a
//! per-message allowance ([`MESSAGE_OVERHEAD`]) — never fewer than a byte-level BPE or a
//! SentencePiece vocabulary with byte fallback gives. The bytes are also the cheap first
//! check: a prompt whose bytes fit is never counted further.

use serde_json::Value;

use crate::request::{BrainRequest, ReflectRequest};

/// The context a brain assumes when neither the scenario nor the server says.
pub const CONTEXT_TOKENS_DEFAULT: u32 = 8192;

/// Tokens a chat template adds around one message, at the most we allow for (role
/// markers and separators: OpenAI counts 3–4, llama.cpp templates a few more).
pub const MESSAGE_OVERHEAD: u64 = 16;

/// How a brain counts the tokens of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenCounter {
    /// The server counts, with its own tokenizer and template (llama.cpp).
    Server,
    /// tiktoken's `o200k_base` (GPT-4o, 4.1, 5, o-series).
    O200k,
    /// tiktoken's `cl100k_base` (GPT-4, GPT-3.5).
    Cl100k,
    /// UTF-8 bytes plus [`MESSAGE_OVERHEAD`] per message: an upper bound.
    Bytes,
}

impl TokenCounter {
    /// The local counter for `model`: tiktoken's encoding for OpenAI-family models,
    /// else bytes.
    pub fn for_model(model: &str) -> TokenCounter {
        use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};
        match get_tokenizer(&model.to_ascii_lowercase()) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => TokenCounter::O200k,
            Some(Tokenizer::Cl100kBase) => TokenCounter::Cl100k,
            _ => TokenCounter::Bytes,
        }
    }

    /// What it is, for messages and `hearsay check`.
    pub fn describe(self) -> &'static str {
        match self {
            TokenCounter::Server => "the server's tokenizer",
            TokenCounter::O200k => "tiktoken o200k_base",
            TokenCounter::Cl100k => "tiktoken cl100k_base",
            TokenCounter::Bytes => "UTF-8 bytes (an upper bound)",
        }
    }

    /// The tokens of `body`'s messages (and response schema) by a local counter; `None`
    /// for [`TokenCounter::Server`], which only the server can answer.
    pub fn count_locally(self, body: &Value) -> Option<u64> {
        let texts = texts(body);
        let n = texts.len() as u64;
        let encoded = |bpe: &tiktoken_rs::CoreBPE| -> u64 {
            texts
                .iter()
                .map(|t| bpe.encode_ordinary(t).len() as u64)
                .sum()
        };
        match self {
            TokenCounter::Server => None,
            TokenCounter::O200k => {
                Some(encoded(tiktoken_rs::o200k_base_singleton()) + n * MESSAGE_OVERHEAD)
            }
            TokenCounter::Cl100k => {
                Some(encoded(tiktoken_rs::cl100k_base_singleton()) + n * MESSAGE_OVERHEAD)
            }
            TokenCounter::Bytes => Some(upper_bound(body)),
        }
    }
}

/// The message contents of a chat body, and its response schema when it has one.
fn texts(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    if let Some(format) = body.get("response_format") {
        out.push(format.to_string());
    }
    out
}

/// UTF-8 bytes of the messages and the schema, plus [`MESSAGE_OVERHEAD`] per message:
/// never fewer than the tokens any byte-level tokenizer gives.
pub fn upper_bound(body: &Value) -> u64 {
    let texts = texts(body);
    texts.iter().map(|t| t.len() as u64).sum::<u64>() + texts.len() as u64 * MESSAGE_OVERHEAD
}

/// A brain's context: how many tokens a request may hold (prompt and answer), where that
/// figure came from, and how prompts are counted against it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextBudget {
    /// Prompt plus `max_tokens`, at most.
    pub context_tokens: u32,
    /// `scenario` (context_tokens), the server (`llama.cpp /props`, `ollama /api/show`),
    /// or `default`.
    pub source: String,
    /// How prompts are counted.
    pub counter: TokenCounter,
}

impl ContextBudget {
    /// The budget before the server is asked: the scenario's figure or the default, and
    /// the model's local counter.
    pub fn new(context_tokens: Option<u32>, model: &str) -> ContextBudget {
        ContextBudget {
            context_tokens: context_tokens.unwrap_or(CONTEXT_TOKENS_DEFAULT),
            source: if context_tokens.is_some() {
                "scenario".into()
            } else {
                "default".into()
            },
            counter: TokenCounter::for_model(model),
        }
    }
}

/// What a trim cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Recalled memories (the best stay).
    Recalled,
    /// NPCs in sight (the nearest stay).
    Npcs,
    /// Places (the nearest stay).
    Places,
    /// The short-term window (the latest stay).
    ShortTerm,
    /// A reflection's evidence (the latest stay).
    Evidence,
    /// What was heard this tick (the first lines stay): only when nothing else is left
    /// to cut, since a call that cannot be sent loses all of it.
    Heard,
    /// Scenario events witnessed this tick (the first stay), with what was heard.
    Witnessed,
    /// Each heard and witnessed text shortened to `keep` characters (with `…`): the
    /// very last resort, for a context so small that one line heard and the persona
    /// fill it.
    Quoted,
}

/// One step of trimming: cut to at most this many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    /// Which part of the prompt this step shortens.
    pub cut: Cut,
    /// How many stay.
    pub keep: usize,
}

const fn trim(cut: Cut, keep: usize) -> Trim {
    Trim { cut, keep }
}

/// Every trim, in the order tried: first to a useful minimum — recalled memories beyond
/// the top 3, NPCs in sight beyond the nearest 8, places beyond the nearest 5, the
/// short-term window but its latest entry, a reflection's evidence beyond the latest 10
/// — then, for a context too small even for that, deeper in the same order, and last
/// what was heard this tick down to its first line (a long speech heard from several
/// NPCs can fill a 512-token context alone; a call that does not fit is not sent at all),
/// the events witnessed down to the first, then each quoted text heard or witnessed
/// shortened to 160, then 40 characters (one long line heard beside a long persona
/// overflowed 512 tokens with 128 for the answer: llama.cpp, SmolLM2, CI), and as a last
/// resort the event witnessed and the line heard left out (CI again: a prompt of 385
/// tokens with everything else trimmed and 384 left by the answer — an NPC that decides
/// without what it heard still decides; one whose call is not sent stays). Never the
/// persona, the position or the answer format.
pub const TRIMS: [Trim; 19] = [
    trim(Cut::Recalled, 3),
    trim(Cut::Npcs, 8),
    trim(Cut::Places, 5),
    trim(Cut::ShortTerm, 1),
    trim(Cut::Evidence, 10),
    trim(Cut::Recalled, 1),
    trim(Cut::Npcs, 3),
    trim(Cut::Places, 2),
    trim(Cut::ShortTerm, 0),
    trim(Cut::Evidence, 5),
    trim(Cut::Recalled, 0),
    trim(Cut::Npcs, 0),
    trim(Cut::Places, 0),
    trim(Cut::Heard, 1),
    trim(Cut::Witnessed, 1),
    trim(Cut::Quoted, 160),
    trim(Cut::Quoted, 40),
    trim(Cut::Witnessed, 0),
    trim(Cut::Heard, 0),
];

/// `text` cut to `keep` characters, the last of them `…`; `None` when it is not longer.
fn shortened(text: &str, keep: usize) -> Option<String> {
    if text.chars().count() <= keep {
        return None;
    }
    let mut cut: String = text.chars().take(keep.saturating_sub(1)).collect();
    cut.push('…');
    Some(cut)
}

/// The `keep` items of `items` nearest to `at` (by squared distance, then by place in the
/// list), in their original order.
fn nearest<T>(
    items: &mut Vec<T>,
    keep: usize,
    pos: impl Fn(&T) -> hearsay_core::Pos,
    at: hearsay_core::Pos,
) {
    if items.len() <= keep {
        return;
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (pos(&items[i]).dist2(at), i));
    let mut kept: Vec<usize> = order.into_iter().take(keep).collect();
    kept.sort_unstable();
    let mut i = 0;
    items.retain(|_| {
        let keep_it = kept.binary_search(&i).is_ok();
        i += 1;
        keep_it
    });
}

/// Applies `trim` to a decision request; what it did (`recalled 5 -> 3`), or `None` when
/// it changes nothing.
pub fn trim_decision(req: &mut BrainRequest, trim: Trim) -> Option<String> {
    let at = req.observation.at;
    let keep = trim.keep;
    let (what, before, after) = match trim.cut {
        Cut::Recalled => {
            let before = req.recalled.len();
            req.recalled.truncate(keep);
            ("recalled", before, req.recalled.len())
        }
        Cut::Npcs => {
            let before = req.observation.seen_npcs.len();
            nearest(&mut req.observation.seen_npcs, keep, |n| n.at, at);
            ("npcs", before, req.observation.seen_npcs.len())
        }
        Cut::Places => {
            let before = req.places.len();
            // The run's shared list stays whole: this request gets its own, cut.
            let mut places = req.places.to_vec();
            nearest(&mut places, keep, |p| p.at, at);
            req.places = places.into();
            ("places", before, req.places.len())
        }
        Cut::ShortTerm => {
            let recent = &mut req.observation.recent;
            let before = recent.len();
            if before > keep {
                // The NPC's window is shared with its component: this request cuts a copy.
                std::sync::Arc::make_mut(recent).drain(..before - keep);
            }
            ("short_term", before, recent.len())
        }
        Cut::Heard => {
            let heard = &mut req.observation.heard;
            let before = heard.len();
            heard.truncate(keep);
            ("heard", before, heard.len())
        }
        Cut::Witnessed => {
            let witnessed = &mut req.observation.witnessed;
            let before = witnessed.len();
            witnessed.truncate(keep);
            ("witnessed", before, witnessed.len())
        }
        Cut::Quoted => {
            let obs = &mut req.observation;
            let longest = |obs: &hearsay_core::Observation| {
                let heard = obs.heard.iter().map(|h| h.text.chars().count());
                let seen = obs.witnessed.iter().map(|w| w.text.chars().count());
                heard.chain(seen).max().unwrap_or(0)
            };
            let before = longest(obs);
            for h in &mut obs.heard {
                if let Some(cut) = shortened(&h.text, keep) {
                    h.text = cut.into();
                }
            }
            for w in &mut obs.witnessed {
                if let Some(cut) = shortened(&w.text, keep) {
                    w.text = cut;
                }
            }
            ("quoted characters", before, longest(obs))
        }
        Cut::Evidence => return None,
    };
    (after < before).then(|| format!("{what} {before} -> {after}"))
}

/// Applies `trim` to a reflection request (only evidence is cut: the latest stay).
pub fn trim_reflection(req: &mut ReflectRequest, trim: Trim) -> Option<String> {
    if trim.cut != Cut::Evidence {
        return None;
    }
    let before = req.memories.len();
    if before <= trim.keep {
        return None;
    }
    req.memories.drain(..before - trim.keep);
    Some(format!("evidence {before} -> {}", trim.keep))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::KnownPlace;
    use hearsay_core::{
        Grid, Language, MemoryId, MemoryKind, NpcId, Observation, Pos, RecentMemory, SeenNpc,
    };
    use serde_json::json;

    fn request() -> BrainRequest {
        BrainRequest {
            seed: 1,
            language: Language::En,
            persona: "A baker.".into(),
            grid: Grid {
                width: 100,
                height: 100,
            },
            places: (0..9)
                .map(|i| KnownPlace {
                    name: format!("p{i}"),
                    at: Pos::new(i * 10, 0),
                })
                .collect(),
            observation: Observation {
                npc: NpcId(0),
                name: "A".into(),
                tick: 3,
                at: Pos::new(40, 0),
                target: None,
                seen_npcs: (0..12)
                    .map(|i| SeenNpc {
                        id: NpcId(i + 1),
                        name: format!("n{i}").into(),
                        at: Pos::new(i as i32 * 3, 0),
                        audible: false,
                    })
                    .collect(),
                seen_places: vec![],
                heard: vec![],
                witnessed: vec![],
                recent: (0..5)
                    .map(|i| RecentMemory {
                        id: MemoryId(i),
                        kind: MemoryKind::Observation,
                        content: format!("m{i}").into(),
                        importance: 4,
                        tick: i,
                        source: None,
                        place: Default::default(),
                    })
                    .collect::<Vec<_>>()
                    .into(),
                known_by: vec![],
            },
            recalled: (0..5)
                .map(|i| crate::request::Recollection {
                    id: MemoryId(i),
                    kind: MemoryKind::Observation,
                    content: format!("r{i}").into(),
                    importance: 4,
                    tick: i,
                    source: None,
                    place: Default::default(),
                })
                .collect(),
        }
    }

    /// The last resorts: the trims after the quoted texts' length.
    const LAST_RESORTS: usize = 2;

    #[test]
    fn what_was_heard_is_cut_to_its_first_line_before_the_last_resorts() {
        let mut r = request();
        r.observation.heard = (0..3)
            .map(|i| hearsay_core::HeardLine {
                speaker: NpcId(i),
                speaker_name: format!("n{i}").into(),
                text: format!("line {i}").into(),
                to: None,
                whispered: false,
            })
            .collect();
        let (trims, last_resorts) = TRIMS.split_at(TRIMS.len() - LAST_RESORTS);
        let steps: Vec<String> = trims
            .iter()
            .filter_map(|t| trim_decision(&mut r, *t))
            .collect();
        assert_eq!(steps.last().map(String::as_str), Some("heard 3 -> 1"));
        assert_eq!(
            TRIMS.iter().position(|t| t.cut == Cut::Heard),
            Some(TRIMS.len() - 6),
            "after everything else but the events witnessed, the quoted texts' length and \
             the last resorts"
        );
        assert_eq!(r.observation.heard.len(), 1);
        assert_eq!(r.observation.heard[0].text.as_ref(), "line 0");
        let steps: Vec<String> = last_resorts
            .iter()
            .filter_map(|t| trim_decision(&mut r, *t))
            .collect();
        assert_eq!(steps, ["heard 1 -> 0"], "the line heard goes last");
        assert!(r.observation.heard.is_empty());
    }

    #[test]
    fn a_long_line_heard_is_shortened_and_then_left_out() {
        let mut r = request();
        let long = "fresh fish at the market ".repeat(12);
        r.observation.heard = vec![hearsay_core::HeardLine {
            speaker: NpcId(1),
            speaker_name: "n1".into(),
            text: long.as_str().into(),
            to: None,
            whispered: false,
        }];
        r.observation.witnessed = (0..2)
            .map(|i| hearsay_core::Witnessed {
                place: format!("p{i}"),
                text: format!("event {i}"),
            })
            .collect();
        let (trims, last_resorts) = TRIMS.split_at(TRIMS.len() - LAST_RESORTS);
        let steps: Vec<String> = trims
            .iter()
            .filter_map(|t| trim_decision(&mut r, *t))
            .collect();
        let n = long.chars().count();
        assert_eq!(
            steps[steps.len() - 3..],
            [
                "witnessed 2 -> 1".to_owned(),
                format!("quoted characters {n} -> 160"),
                "quoted characters 160 -> 40".to_owned()
            ]
        );
        let heard = &r.observation.heard[0].text;
        assert_eq!(heard.chars().count(), 40);
        assert!(heard.ends_with('…') && long.starts_with(heard.trim_end_matches('…')));
        assert_eq!(
            r.observation.witnessed[0].text, "event 0",
            "short texts stay"
        );
        let steps: Vec<String> = last_resorts
            .iter()
            .filter_map(|t| trim_decision(&mut r, *t))
            .collect();
        assert_eq!(steps, ["witnessed 1 -> 0", "heard 1 -> 0"]);
        assert!(
            TRIMS.iter().all(|t| trim_decision(&mut r, *t).is_none()),
            "nothing more"
        );
    }

    #[test]
    fn trims_keep_the_nearest_and_the_latest_in_order() {
        let mut r = request();
        let steps: Vec<String> = TRIMS[..5]
            .iter()
            .filter_map(|t| trim_decision(&mut r, *t))
            .collect();
        assert_eq!(
            steps,
            [
                "recalled 5 -> 3",
                "npcs 12 -> 8",
                "places 9 -> 5",
                "short_term 5 -> 1"
            ]
        );
        let names: Vec<&str> = r.observation.seen_npcs.iter().map(|n| &*n.name).collect();
        // At x = 40: n13 would be at 39; the nearest eight of 0, 3, …, 33 are n4..n11.
        assert_eq!(names, ["n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11"]);
        let places: Vec<&str> = r.places.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(places, ["p2", "p3", "p4", "p5", "p6"]);
        assert_eq!(
            r.observation.recent[0].content.as_ref(),
            "m4",
            "the latest stays"
        );
        let deeper: Vec<String> = TRIMS[5..]
            .iter()
            .filter_map(|t| trim_decision(&mut r, *t))
            .collect();
        assert_eq!(
            deeper,
            [
                "recalled 3 -> 1",
                "npcs 8 -> 3",
                "places 5 -> 2",
                "short_term 1 -> 0",
                "recalled 1 -> 0",
                "npcs 3 -> 0",
                "places 2 -> 0"
            ]
        );
        assert!(r.observation.seen_npcs.is_empty());
        assert!(!r.persona.is_empty(), "never the persona");
        assert!(
            TRIMS.iter().all(|t| trim_decision(&mut r, *t).is_none()),
            "nothing more"
        );
    }

    #[test]
    fn counters_never_count_fewer_than_the_tokens() {
        let body = json!({"messages": [
            {"role": "system", "content": "You are Bob. 市场有新鲜的鱼。"},
            {"role": "user", "content": "Turn 3. What do you do?"},
        ]});
        let bytes = TokenCounter::Bytes.count_locally(&body).expect("bytes");
        let o200k = TokenCounter::O200k.count_locally(&body).expect("o200k");
        assert!(o200k < bytes, "{o200k} < {bytes}");
        assert_eq!(TokenCounter::for_model("gpt-4o-mini"), TokenCounter::O200k);
        assert_eq!(TokenCounter::for_model("gpt-4-turbo"), TokenCounter::Cl100k);
        assert_eq!(
            TokenCounter::for_model("smollm2-135m-instruct"),
            TokenCounter::Bytes
        );
        assert_eq!(TokenCounter::Server.count_locally(&body), None);
    }
}
