//! [`svg`]: a run drawn as an SVG timeline: one lane per holder
//! with its holds, one lane per node with its up/paused/down state, the
//! faults marked across all lanes, and the verdict (overlapping holds).

use std::fmt::Write as _;
use std::path::Path;

use tokio::time::Instant;

use redquorum::testkit::{History, Hold, NodeState};

use crate::timeline::Timeline;

const WIDTH: f64 = 1400.0;
const PLOT_X0: f64 = 200.0;
const PLOT_X1: f64 = 1310.0;
const LANES_Y0: f64 = 164.0;
const LANE: f64 = 30.0;
const BAR: f64 = 22.0;
const HOLD: &str = "#3b6fb6";
const OVERLAP: &str = "#d62728";
const FAULT: &str = "#6f42c1";
const GOOD: &str = "#1a7f37";

fn state_style(state: NodeState) -> (&'static str, &'static str) {
    match state {
        NodeState::Up => ("#9fd8a8", "up"),
        NodeState::Paused => ("#f2c14e", "paused"),
        NodeState::Down => ("#e8837e", "down"),
        _ => ("#cccccc", "unknown"),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Seconds between axis ticks: at most about 15 of them.
fn tick_step(span: f64) -> f64 {
    let steps = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0];
    steps
        .into_iter()
        .find(|s| span / s <= 15.0)
        .unwrap_or(600.0)
}

/// Draws `history`'s holds beside `timeline`'s nodes and faults, as
/// an SVG document titled `title`: one lane per holder (numbered as
/// recorded), one per node (up, paused, down), each fault a dashed line
/// across every lane, overlapping holds in red, and the verdict.
#[must_use]
pub fn svg(history: &History, timeline: &Timeline, title: &str) -> String {
    let holds = history.holds();
    let overlaps = history.overlaps();
    let tl = timeline.lock();
    let start = tl.start;
    let secs = |at: Instant| at.saturating_duration_since(start).as_secs_f64();
    let end = tl.end.map(secs).unwrap_or_else(|| {
        let ends = holds.iter().map(|h| secs(h.end));
        let marks = tl.marks.iter().map(|(at, _)| secs(*at));
        let states = tl.states.iter().map(|(at, _, _)| secs(*at));
        ends.chain(marks).chain(states).fold(1.0, f64::max)
    });
    let end = end.max(0.001);
    let x = |t: f64| PLOT_X0 + (t / end).clamp(0.0, 1.0) * (PLOT_X1 - PLOT_X0);
    let mut holders: Vec<usize> = holds.iter().map(|h| h.holder).collect();
    holders.sort_unstable();
    holders.dedup();
    let lane_y = |lane: usize| LANES_Y0 + lane as f64 * LANE;
    let nodes_y0 = lane_y(holders.len()) + 24.0;
    let node_y = |node: usize| nodes_y0 + node as f64 * LANE;
    let axis_y = node_y(tl.nodes.len()) + 8.0;
    let height = axis_y + 56.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="20" y="32" font-size="20" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let (colour, verdict) = if overlaps.is_empty() {
        (
            GOOD,
            format!("overlapping holds: 0 \u{2713}   ({} holds)", holds.len()),
        )
    } else {
        (
            OVERLAP,
            format!(
                "overlapping holds: {} \u{2717}   ({} holds)",
                overlaps.len(),
                holds.len()
            ),
        )
    };
    let _ = writeln!(
        s,
        r#"<text x="20" y="58" font-size="16" font-weight="bold" fill="{colour}">{verdict}</text>"#
    );
    legend(&mut s);

    // Lane backgrounds and labels.
    for (lane, holder) in holders.iter().enumerate() {
        let y = lane_y(lane);
        let count = holds.iter().filter(|h| h.holder == *holder).count();
        let _ = writeln!(
            s,
            r##"<rect x="{PLOT_X0}" y="{y}" width="{}" height="{BAR}" fill="#f3f4f6"/><text x="{}" y="{}" text-anchor="end">worker {holder}</text><text x="{}" y="{}" fill="#555">{count} holds</text>"##,
            PLOT_X1 - PLOT_X0,
            PLOT_X0 - 10.0,
            y + 16.0,
            PLOT_X1 + 8.0,
            y + 16.0
        );
    }
    for hold in &holds {
        let lane = holders.iter().position(|h| *h == hold.holder).unwrap_or(0);
        let (x0, x1) = (x(secs(hold.start)), x(secs(hold.end)));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.2}" y="{}" width="{:.2}" height="{BAR}" fill="{HOLD}"/>"#,
            lane_y(lane),
            (x1 - x0).max(1.0)
        );
    }
    for (a, b) in &overlaps {
        overlap(&mut s, (a, b), &holders, (&x, &secs, &lane_y));
    }

    // Node lanes.
    let _ = writeln!(
        s,
        r##"<line x1="20" x2="{}" y1="{}" y2="{}" stroke="#ccc"/>"##,
        WIDTH - 20.0,
        nodes_y0 - 12.0,
        nodes_y0 - 12.0
    );
    for (node, label) in tl.nodes.iter().enumerate() {
        let y = node_y(node);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            PLOT_X0 - 10.0,
            y + 16.0,
            escape(label)
        );
        let mut changes: Vec<(f64, NodeState)> = tl
            .states
            .iter()
            .filter(|(_, n, _)| *n == node)
            .map(|(at, _, state)| (secs(*at), *state))
            .collect();
        changes.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut segments = vec![(0.0, NodeState::Up)];
        segments.extend(changes);
        for (i, (from, state)) in segments.iter().enumerate() {
            let to = segments.get(i + 1).map_or(end, |next| next.0);
            let (x0, x1) = (x(*from), x(to));
            let (fill, name) = state_style(*state);
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.2}" y="{y}" width="{:.2}" height="{BAR}" fill="{fill}"/>"#,
                (x1 - x0).max(0.0)
            );
            if x1 - x0 > 60.0 {
                let _ = writeln!(
                    s,
                    r##"<text x="{:.2}" y="{}" fill="#333" font-size="12">{name}</text>"##,
                    x0 + 6.0,
                    y + 15.0
                );
            }
        }
    }

    // Faults across every lane. A label runs right of its line, so a
    // line its label covers starts on a lower row.
    let mut marks: Vec<(f64, &str)> = tl
        .marks
        .iter()
        .map(|(at, l)| (x(secs(*at)), l.as_str()))
        .collect();
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut placed: Vec<(f64, f64, usize)> = Vec::new();
    for (mx, label) in marks {
        let width = label.chars().count() as f64 * 8.2 + 14.0;
        let row = placed
            .iter()
            .filter(|(from, to, _)| *from < mx && mx <= *to)
            .map(|(_, _, row)| row + 1)
            .max()
            .unwrap_or(0)
            .min(2);
        placed.push((mx, mx + width, row));
        let label_y = 112.0 + row as f64 * 17.0;
        let _ = writeln!(
            s,
            r#"<line x1="{mx:.1}" x2="{mx:.1}" y1="{:.1}" y2="{axis_y:.1}" stroke="{FAULT}" stroke-width="2" stroke-dasharray="6 4"/><text x="{:.1}" y="{label_y:.1}" fill="{FAULT}" font-weight="bold">{}</text>"#,
            label_y - 12.0,
            mx + 4.0,
            escape(label)
        );
    }

    // Time axis.
    let _ = writeln!(
        s,
        r##"<line x1="{PLOT_X0}" x2="{PLOT_X1}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>"##
    );
    let step = tick_step(end);
    let mut t = 0.0;
    while t <= end + 1e-9 {
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.2}" x2="{tx:.2}" y1="{axis_y}" y2="{}" stroke="#333"/><text x="{tx:.2}" y="{}" text-anchor="middle">{t} s</text>"##,
            axis_y + 6.0,
            axis_y + 22.0
        );
        t = ((t + step) * 1000.0).round() / 1000.0;
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#555">time since the start of the run (monotonic clock of the client process)</text>"##,
        (PLOT_X0 + PLOT_X1) / 2.0,
        axis_y + 44.0
    );
    s.push_str("</svg>\n");
    s
}

/// [`svg`], written to `path`.
///
/// # Errors
///
/// The file cannot be written (the error names the path).
pub fn write_svg(
    history: &History,
    path: impl AsRef<Path>,
    timeline: &Timeline,
    title: &str,
) -> std::io::Result<()> {
    let path = path.as_ref();
    std::fs::write(path, svg(history, timeline, title)).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("writing the timeline to {}: {e}", path.display()),
        )
    })
}

fn legend(s: &mut String) {
    let items = [
        (HOLD, "a worker holds the lock"),
        ("#9fd8a8", "node up"),
        ("#f2c14e", "node paused (SIGSTOP)"),
        ("#e8837e", "node down (killed)"),
        (OVERLAP, "overlap (two holders)"),
    ];
    let mut lx = 20.0;
    for (fill, text) in items {
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="74" width="14" height="14" fill="{fill}"/><text x="{:.1}" y="86">{text}</text>"#,
            lx + 20.0
        );
        lx += 30.0 + text.len() as f64 * 7.4;
    }
    let _ = writeln!(
        s,
        r#"<line x1="{lx:.1}" x2="{:.1}" y1="81" y2="81" stroke="{FAULT}" stroke-width="2" stroke-dasharray="6 4"/><text x="{:.1}" y="86">fault injected</text>"#,
        lx + 24.0,
        lx + 30.0
    );
}

type Scales<'a> = (
    &'a dyn Fn(f64) -> f64,
    &'a dyn Fn(Instant) -> f64,
    &'a dyn Fn(usize) -> f64,
);

/// Both holds of an overlapping pair, their common part in red.
fn overlap(
    s: &mut String,
    (a, b): (&Hold, &Hold),
    holders: &[usize],
    (x, secs, lane_y): Scales<'_>,
) {
    let from = x(secs(a.start.max(b.start)));
    let to = x(secs(a.end.min(b.end)));
    for holder in [a.holder, b.holder] {
        let lane = holders.iter().position(|h| *h == holder).unwrap_or(0);
        let _ = writeln!(
            s,
            r#"<rect x="{from:.2}" y="{}" width="{:.2}" height="{}" fill="{OVERLAP}"/>"#,
            lane_y(lane) - 3.0,
            (to - from).max(2.0),
            BAR + 6.0
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_picture_has_every_lane_fault_and_the_verdict() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let timeline = Timeline::new(t, ["node 0", "node 1", "node 2"]);
        timeline.node_at(1, t + ms(100), NodeState::Down);
        timeline.node_at(1, t + ms(300), NodeState::Up);
        timeline.node_at(2, t + ms(150), NodeState::Paused);
        timeline.mark_at(t + ms(100), "kill <node 1>");
        let history = History::default();
        history.record(0, t, t + ms(50), t + ms(40));
        history.record(1, t + ms(60), t + ms(500), t + ms(90));
        let clean = svg(&history, &timeline, "a & b");
        assert!(clean.starts_with("<svg") && clean.trim_end().ends_with("</svg>"));
        assert!(clean.contains("a &amp; b") && clean.contains("kill &lt;node 1&gt;"));
        assert!(clean.contains("overlapping holds: 0"));
        assert!(clean.contains("worker 0") && clean.contains("worker 1"));
        assert_eq!(clean.matches(">down<").count(), 1, "{clean}");
        assert_eq!(clean.matches(">paused<").count(), 1);
        // Red only in the legend.
        assert_eq!(clean.matches(OVERLAP_FILL).count(), 1);

        history.record(2, t + ms(70), t + ms(80), t + ms(80));
        let bad = svg(&history, &timeline, "overlap");
        assert!(bad.contains("overlapping holds: 1"));
        // The common part, drawn on both holders' lanes.
        assert_eq!(bad.matches(OVERLAP_FILL).count(), 1 + 2);
    }

    const OVERLAP_FILL: &str = "fill=\"#d62728\"/>";

    #[test]
    fn ticks_stay_few() {
        assert_eq!(tick_step(6.0), 0.5);
        assert_eq!(tick_step(0.5), 0.1);
        assert_eq!(tick_step(600.0), 60.0);
    }
}
