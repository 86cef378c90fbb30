//! The offline brain: a deterministic gossip.
//!
//! In order of preference, each tick:
//! 1. **Gossip.** If someone can hear, say the most important recalled memory (importance
//!    at least [`HeuristicBrain::share_importance_min`]) that one of them has not heard
//!    yet — as far as this NPC knows — passing on the words, not the attribution.
//! 2. **Go where memories point.** Walk toward a place named in the most important
//!    recalled memory that names one; on arrival, linger a while or wander off.
//! 3. **Wander.** Keep walking to the current target, sometimes stay, else pick a random
//!    nearby cell.
//!
//! Every random draw comes from the seeded stream for (seed, NPC, tick), so the same
//! request always gets the same decision.

use hearsay_core::components::gist_key;
use hearsay_core::{Decision, Pos, rng};
use rand::RngExt;

use crate::request::{BrainRequest, Recollection};
use crate::{BoxFuture, Brain, BrainError, BrainFailure, BrainReply};

/// The heuristic brain and its knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct HeuristicBrain {
    /// Memories below this importance are not worth telling (moves are 4).
    pub share_importance_min: u8,
    /// Chance per tick of heading for a place a memory names (else wander).
    pub follow_place_p: f64,
    /// Chance per tick of staying once at such a place.
    pub linger_p: f64,
    /// Chance per tick of keeping on toward the current target while wandering.
    pub keep_target_p: f64,
    /// Chance per tick of staying put while wandering.
    pub stay_p: f64,
    /// How far a wander target may be, per axis.
    pub wander_radius: i32,
}

impl Default for HeuristicBrain {
    fn default() -> Self {
        Self {
            share_importance_min: 6,
            follow_place_p: 0.8,
            linger_p: 0.6,
            keep_target_p: 0.75,
            stay_p: 0.1,
            wander_radius: 5,
        }
    }
}

impl HeuristicBrain {
    /// The decision for `req` (pure: same request, same decision).
    pub fn decide_now(&self, req: &BrainRequest) -> Decision {
        let obs = &req.observation;
        let mut rng = rng::stream(req.seed, obs.npc, obs.tick, "heuristic");
        let mut ranked: Vec<&Recollection> = req.recalled.iter().collect();
        // Stable sort: among equals, recall's own order (best first) decides.
        ranked.sort_by_key(|r| std::cmp::Reverse(r.importance));

        if obs.audible().next().is_some() {
            for r in ranked
                .iter()
                .filter(|r| r.importance >= self.share_importance_min)
            {
                let gist = req.language.gist(&r.content, r.source.as_deref()).trim();
                if gist.is_empty() {
                    continue;
                }
                let key = gist_key(gist);
                if obs.audible().any(|a| !obs.known_by.contains(&(key, a.id))) {
                    return Decision::Talk {
                        speech: gist.to_owned(),
                    };
                }
            }
        }

        let named = ranked.iter().find_map(|r| {
            let content = r.content.to_lowercase();
            req.places
                .iter()
                .find(|p| content.contains(&p.name.to_lowercase()))
        });
        if let Some(place) = named {
            if place.at == obs.at {
                if rng.random_bool(self.linger_p) {
                    return Decision::Stay;
                }
            } else if rng.random_bool(self.follow_place_p) {
                return Decision::Move { to: place.at };
            }
        }

        if let Some(target) = obs.target.filter(|&t| t != obs.at)
            && rng.random_bool(self.keep_target_p)
        {
            return Decision::Move { to: target };
        }
        if rng.random_bool(self.stay_p) {
            return Decision::Stay;
        }
        let r = self.wander_radius.max(1);
        let to = req.grid.clamp(Pos::new(
            obs.at.x + rng.random_range(-r..=r),
            obs.at.y + rng.random_range(-r..=r),
        ));
        if to == obs.at {
            Decision::Stay
        } else {
            Decision::Move { to }
        }
    }
}

impl Brain for HeuristicBrain {
    fn provider(&self) -> &str {
        "heuristic"
    }

    fn decide<'a>(
        &'a self,
        request: &'a BrainRequest,
    ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>> {
        Box::pin(async move {
            let decision = self.decide_now(request);
            let raw = serde_json::to_string(&decision)
                .map_err(|e| BrainError::Malformed(e.to_string()))?;
            Ok(BrainReply::plain(decision, raw))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::KnownPlace;
    use hearsay_core::{Grid, Language, MemoryId, MemoryKind, NpcId, Observation, SeenNpc};

    fn request(audible: bool, recalled: Vec<Recollection>) -> BrainRequest {
        BrainRequest {
            seed: 42,
            language: Language::En,
            persona: "A baker.".into(),
            grid: Grid {
                width: 24,
                height: 16,
            },
            places: vec![KnownPlace {
                name: "market".into(),
                at: Pos::new(15, 8),
            }],
            observation: Observation {
                npc: NpcId(1),
                name: "Alice".into(),
                tick: 5,
                at: Pos::new(12, 8),
                target: None,
                seen_npcs: vec![SeenNpc {
                    id: NpcId(2),
                    name: "Carol".into(),
                    at: Pos::new(13, 8),
                    audible,
                }],
                seen_places: vec![],
                heard: vec![],
                witnessed: vec![],
                recent: vec![],
                known_by: vec![],
            },
            recalled,
        }
    }

    fn memory(id: u64, content: &str, importance: u8, source: Option<&str>) -> Recollection {
        Recollection {
            id: MemoryId(id),
            kind: MemoryKind::Conversation,
            content: content.into(),
            importance,
            tick: 1,
            source: source.map(str::to_owned),
        }
    }

    #[test]
    fn gossips_the_most_important_untold_memory_without_attribution() {
        let req = request(
            true,
            vec![
                memory(1, "I decided to move to (3, 4)", 4, None),
                memory(
                    2,
                    "Bob said: The market nearby is selling fresh fish.",
                    8,
                    Some("Bob"),
                ),
            ],
        );
        assert_eq!(
            HeuristicBrain::default().decide_now(&req),
            Decision::Talk {
                speech: "The market nearby is selling fresh fish.".into()
            }
        );
    }

    #[test]
    fn does_not_retell_what_the_listener_knows_and_walks_to_the_place_instead() {
        let mut req = request(
            true,
            vec![memory(
                2,
                "Bob said: The market nearby is selling fresh fish.",
                8,
                Some("Bob"),
            )],
        );
        let key = gist_key("The market nearby is selling fresh fish.");
        req.observation.known_by = vec![(key, NpcId(2))];
        let brain = HeuristicBrain {
            follow_place_p: 1.0,
            ..HeuristicBrain::default()
        };
        assert_eq!(
            brain.decide_now(&req),
            Decision::Move {
                to: Pos::new(15, 8)
            }
        );
    }

    #[test]
    fn trivia_is_not_gossip() {
        let req = request(
            true,
            vec![memory(1, "I decided to move to (3, 4)", 4, None)],
        );
        assert!(!matches!(
            HeuristicBrain::default().decide_now(&req),
            Decision::Talk { .. }
        ));
    }

    #[test]
    fn decisions_are_reproducible_and_stay_on_the_map() {
        let brain = HeuristicBrain::default();
        let mut seen = std::collections::BTreeSet::new();
        for tick in 0..200 {
            let mut req = request(false, vec![]);
            req.observation.tick = tick;
            req.observation.at = Pos::new(0, 15);
            let d = brain.decide_now(&req);
            assert_eq!(d, brain.decide_now(&req));
            if let Decision::Move { to } = d {
                assert!(req.grid.contains(to));
            }
            seen.insert(format!("{d:?}"));
        }
        assert!(seen.len() > 10, "wandering varies: {seen:?}");
    }
}
