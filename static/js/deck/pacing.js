/**
 * Pacing in the speaker window: the time left in the talk, this slide's budget, and whether the
 * presenter is ahead or behind, in words and colour.
 *
 * Every slide has a budget in seconds (app/content/pacing.py: its notes read at 140 words a minute, its
 * steps, its prediction questions), sent in the page's config with the slot the talk must fit (a
 * track's minutes; the whole deck's budgets added up). The plan at a position is the budgets of the
 * slides before it plus the share of this slide's budget its step has reached; the clock is compared
 * with it. The clock starts at the presenter's first move, on plan at the position moved from (a talk
 * opened at a deep link starts on time there, not ahead by the slides before it); a click on the panel
 * restarts it on plan at the current slide.
 *
 * The speaker window is reveal.js's own page (its notes plugin), same origin: we find it from its
 * messages (it sends a heartbeat every second, which also ticks the panel) and draw into it.
 */

// Within this much of the plan, the presenter is on time: a slide's budget is not a stopwatch.
export const ON_TIME_S = 30;
const COLOURS = { ahead: '#0b5cad', 'on time': '#17792c', behind: '#c62828', waiting: '#555' };

export function clock(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${rest}` : `${m}:${rest}`;
}

/** Seconds the plan has spent when the talk is at `pos` (slide index, step of stepCount). While a live run
 *  still streams its steps are not all known (step 2 of "2+"): no share of the slide is counted yet. */
export function plannedAt(budgets, ids, pos) {
  let before = 0;
  for (let i = 0; i < pos.slideIndex; i += 1) before += budgets[ids[i]] ?? 0;
  const share = pos.stepCount > 1 && !pos.pending ? Math.min(1, pos.step / pos.stepCount) : 0;
  return before + share * (budgets[ids[pos.slideIndex]] ?? 0);
}

/** What the panel says: from the clock (`elapsed`, null before the start) and the plan. */
export function verdict({ elapsed, planned, slot, budget, onSlide }) {
  const slide = `${clock(onSlide)} of ${clock(budget)}`;
  if (elapsed === null) {
    return { kind: 'waiting', headline: 'The clock starts at your first →', left: `${clock(slot)} in the talk`, slide };
  }
  const delta = planned - elapsed; // > 0: the plan is further on than the clock, the presenter is ahead
  const kind = delta > ON_TIME_S ? 'ahead' : delta < -ON_TIME_S ? 'behind' : 'on time';
  const headline = kind === 'on time' ? 'On time' : `${kind === 'ahead' ? 'Ahead' : 'Behind'} by ${clock(Math.abs(delta))}`;
  const left = slot - elapsed >= 0 ? `${clock(slot - elapsed)} left of ${clock(slot)}` : `${clock(elapsed - slot)} over ${clock(slot)}`;
  return { kind, headline, left, slide };
}

/**
 * reveal's speaker page, made to fit a 1280×720 laptop: the previews' labels ("Upcoming") and the layout menu
 * sit in a strip above the previews instead of over their titles, and the clock takes less height.
 */
function fitSpeakerWindow(doc) {
  if (doc.getElementById('distdeck-speaker-style')) return;
  const style = doc.createElement('style');
  style.id = 'distdeck-speaker-style';
  style.textContent = `
    #current-slide, #upcoming-slide { padding-top: 40px !important; }
    #current-slide .label, #upcoming-slide .label { top: 3px !important; left: 8px !important; }
    #speaker-layout { top: 2px !important; }
    .speaker-controls-time { padding: 4px 16px 8px !important; margin-bottom: 4px !important; }
    .speaker-controls-time .clock, .speaker-controls-time .timer { font-size: 1.4em !important; }`;
  doc.head.append(style);
}

/** Keeps the clock and the panel; `config.pacing` comes from the server. */
export function create(config, slideIds) {
  const { budgets, slotSeconds } = config.pacing;
  const talk = config.track ? `${config.track}-minute talk` : 'Full deck';
  let startedAt = null; // the talk's clock: ms since epoch at its zero
  let first = null; // the first position reported: moving away from it starts the clock
  let pos = null;
  let slideSince = Date.now();
  let speaker = null;

  function state(now = Date.now()) {
    const index = pos ? pos.slideIndex : 0;
    return verdict({
      elapsed: startedAt === null ? null : (now - startedAt) / 1000,
      planned: pos ? plannedAt(budgets, slideIds, pos) : 0,
      slot: slotSeconds,
      budget: budgets[slideIds[index]] ?? 0,
      onSlide: startedAt === null ? 0 : (now - Math.max(slideSince, startedAt)) / 1000,
    });
  }

  function panelIn(doc) {
    let panel = doc.getElementById('distdeck-pacing');
    if (panel) return panel;
    const anchor = doc.querySelector('.speaker-controls-time');
    if (!anchor) return null;
    panel = doc.createElement('div');
    panel.id = 'distdeck-pacing';
    panel.title = `Budgets: ${config.pacing.model}. Click to restart the clock on plan at this slide.`;
    // Two short lines, so that at 1280×720 the notes start above the fold.
    Object.assign(panel.style, { padding: '4px 16px 6px', borderBottom: '1px solid rgba(200, 200, 200, 0.5)',
      marginBottom: '6px', cursor: 'pointer', borderLeft: '8px solid #555', display: 'flex', flexWrap: 'wrap',
      alignItems: 'baseline', columnGap: '14px' });
    const label = doc.createElement('h4');
    label.textContent = `Pacing · ${talk}`;
    Object.assign(label.style, { textTransform: 'uppercase', fontWeight: 'normal', fontSize: '0.66em', color: '#666', margin: '0' });
    const headline = doc.createElement('div');
    headline.className = 'pacing-headline';
    Object.assign(headline.style, { fontSize: '1.4em', fontWeight: '700', margin: '0' });
    const left = doc.createElement('div');
    left.className = 'pacing-left';
    const slide = doc.createElement('div');
    slide.className = 'pacing-slide';
    for (const row of [left, slide]) Object.assign(row.style, { fontSize: '1em', fontVariantNumeric: 'tabular-nums' });
    panel.append(label, headline, left, slide);
    panel.addEventListener('click', () => {
      if (!pos) return;
      // Back on plan from here: the clock reads what the plan had spent at the current position.
      startedAt = Date.now() - plannedAt(budgets, slideIds, pos) * 1000;
      draw();
    });
    anchor.after(panel);
    fitSpeakerWindow(doc);
    return panel;
  }

  function draw() {
    if (!speaker || speaker.closed) return;
    let panel;
    try { panel = panelIn(speaker.document); } catch { return; } // not (yet) the speaker page
    if (!panel) return;
    const s = state();
    panel.dataset.kind = s.kind;
    panel.style.borderLeftColor = COLOURS[s.kind];
    const headline = panel.querySelector('.pacing-headline');
    headline.textContent = s.headline;
    headline.style.color = COLOURS[s.kind];
    panel.querySelector('.pacing-left').textContent = s.left;
    panel.querySelector('.pacing-slide').textContent = `This slide: ${s.slide}`;
  }

  return {
    state,
    /** The speaker window said something (it does every second): draw into it. */
    heard(source) {
      speaker = source;
      draw();
    },
    /** A position of the main window (distdeck:position). */
    moved(next) {
      if (first === null) first = { key: `${next.id}/${next.step}`, pos: next };
      else if (startedAt === null && `${next.id}/${next.step}` !== first.key) {
        startedAt = Date.now() - plannedAt(budgets, slideIds, first.pos) * 1000;
      }
      if (!pos || pos.id !== next.id) slideSince = Date.now();
      pos = next;
      draw();
    },
  };
}
