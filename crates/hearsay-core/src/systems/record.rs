//! Record: the tick's events are serialised, hashed into the rolling digest and sealed.

use bevy_ecs::prelude::{Res, ResMut};

use crate::digest;
use crate::events::{SimEvent, TickLine};
use crate::resources::{RollingDigest, SimClock, TickEvents, TickLog};

/// Serialises this tick's events into [`TickLog`] (appending), rolls the digest over them
/// and closes the tick with a `tick` line carrying the hash. Runs last.
pub fn seal_tick(
    clock: Res<SimClock>,
    mut events: ResMut<TickEvents>,
    mut rolling: ResMut<RollingDigest>,
    mut log: ResMut<TickLog>,
) {
    let lines: Vec<String> = events.0.drain(..).map(|e| e.to_line()).collect();
    rolling.0 = digest::roll(&rolling.0, clock.tick, &lines);
    let hash = digest::hex(&rolling.0);
    log.lines.extend(lines);
    log.lines.push(
        SimEvent::Tick(TickLine {
            tick: clock.tick,
            hash: hash.clone(),
        })
        .to_line(),
    );
    log.hash = hash;
}
