"""Measuring a live slide as the back row sees it: every text inside a live simulation, its font
size as rendered on screen (its CSS font size times the SVG's and reveal.js's scale), its box, and
whether any two labels overlap or one leaves the viewport. Used by test_live_views.py, and usable
from a plain Playwright script while working on the views."""

from __future__ import annotations

from dataclasses import dataclass, field

# Rendered px. Axis ticks may be a little smaller than the rest (the and DESIGN.md's bounds).
MIN_TEXT_PX = 16.0
MIN_TICK_PX = 14.0
# Two boxes overlap when they share more than this many px in both directions (glyph boxes have air).
OVERLAP_PX = 2.0

MEASURE_JS = r"""
(slideId) => {
  const slide = document.getElementById(slideId);
  const sims = Array.from(slide.querySelectorAll('.live-sim'));
  const revealScale = window.distdeck.reveal.getScale();
  const texts = [];
  const visible = (el) => {
    const closed = el.closest('details:not([open])');
    if (closed && !el.closest('summary')) return false;
    let opacity = 1;
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden') return false;
      opacity *= Number(cs.opacity);
    }
    return opacity > 0.05;
  };
  const box = (r) => ({ x: r.left, y: r.top, w: r.width, h: r.height });
  for (const sim of sims) {
    for (const t of sim.querySelectorAll('svg text')) {
      const text = t.textContent.trim();
      if (!text || !visible(t)) continue;
      const r = t.getBoundingClientRect();
      if (r.width < 0.5 || r.height < 0.5) continue;
      const m = t.getScreenCTM();
      const scale = Math.hypot(m.a, m.b);
      const svg = t.ownerSVGElement;
      texts.push({
        text: text.slice(0, 60), px: parseFloat(getComputedStyle(t).fontSize) * scale,
        tick: Boolean(t.closest('.axis, .tick')), view: (svg.getAttribute('class') || '').replace('sim-view ', ''),
        box: box(r),
      });
    }
    // HTML text: every text node outside the SVGs (controls, status, caption, checks line).
    const walker = document.createTreeWalker(sim, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!node.textContent.trim() || el.closest('svg') || el.closest('option') || !visible(el)) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const r = range.getBoundingClientRect();
      if (r.width < 0.5 || r.height < 0.5) continue;
      texts.push({
        text: node.textContent.trim().slice(0, 60), px: parseFloat(getComputedStyle(el).fontSize) * revealScale,
        tick: false, view: 'html:' + (el.className || el.tagName.toLowerCase()), box: box(r),
      });
    }
  }
  // A view that drew nothing (it failed) is a problem too: the names of the empty ones.
  const empty = sims.flatMap((s) => Array.from(s.querySelectorAll('svg.sim-view'))
    .filter((v) => !v.querySelector('.frame-layer text')).map((v) => v.getAttribute('class')));
  return { texts, empty, viewport: { w: window.innerWidth, h: window.innerHeight }, revealScale,
           frame: sims.map((s) => s.dataset.frame), status: sims.map((s) => s.dataset.status) };
}
"""


@dataclass
class Report:
    slide: str
    step: int
    texts: list[dict]
    viewport: dict
    small: list[dict] = field(default_factory=list)
    overlaps: list[tuple[dict, dict]] = field(default_factory=list)
    outside: list[dict] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)

    @property
    def smallest(self) -> float:
        return min((t["px"] for t in self.texts), default=float("inf"))

    def problems(self) -> list[str]:
        out = [f"{view}: drew nothing" for view in self.empty]
        out += [f"{t['view']}: {t['text']!r} at {t['px']:.1f} px" for t in self.small]
        out += [f"{a['view']}: {a['text']!r} overlaps {b['view']}: {b['text']!r}" for a, b in self.overlaps]
        out += [f"{t['view']}: {t['text']!r} outside the viewport {t['box']}" for t in self.outside]
        return out


def _intersection(a: dict, b: dict) -> tuple[float, float]:
    w = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    h = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return w, h


def measure(page, slide: str, step: int) -> Report:
    data = page.evaluate(MEASURE_JS, slide)
    report = Report(slide, step, data["texts"], data["viewport"], empty=data["empty"])
    vw, vh = data["viewport"]["w"], data["viewport"]["h"]
    for t in report.texts:
        if t["px"] < (MIN_TICK_PX if t["tick"] else MIN_TEXT_PX) - 0.05:
            report.small.append(t)
        b = t["box"]
        if b["x"] < -1 or b["y"] < -1 or b["x"] + b["w"] > vw + 1 or b["y"] + b["h"] > vh + 1:
            report.outside.append(t)
    texts = report.texts
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            w, h = _intersection(a["box"], b["box"])
            if w > OVERLAP_PX and h > OVERLAP_PX:
                report.overlaps.append((a, b))
    return report


# Every slide, not only the live ones: what on the current slide lies outside the slide's box or the
# viewport, or is cut off by a box that clips it (overflow hidden) — a paragraph below the slide's
# bottom, a chart wider than its column, a popup running off the screen. Text is measured by its
# glyph boxes (text nodes), pictures (svg, img, canvas) and controls by their boxes. What a box
# scrolls (overflow auto/scroll) is reachable, so only the scrolling box itself must fit.
CUT_OFF_JS = r"""
(slideId) => {
  const slide = document.getElementById(slideId);
  const slides = document.querySelector('.reveal .slides').getBoundingClientRect();
  const scale = window.distdeck.reveal.getScale();
  const view = { left: 0, top: 0, right: window.innerWidth, bottom: window.innerHeight };
  // The slide's own box: reveal.js's configured size, scaled, where .slides sits.
  const { width, height } = window.distdeck.reveal.getComputedSlideSize();
  const box = { left: slides.left, top: slides.top, right: slides.left + width * scale, bottom: slides.top + height * scale };
  const shown = (el) => {
    // Speaker notes, and text kept for screen readers only (KaTeX's MathML, visually hidden spans).
    if (el.closest('aside.notes, .speaker-only, .katex-mathml, .sr-only, .visually-hidden')) return false;
    const closed = el.closest('details:not([open])');
    if (closed && !el.closest('summary')) return false;
    for (let e = el; e && e !== slide.parentElement; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || Number(cs.opacity) < 0.05) return false;
    }
    return true;
  };
  const name = (el) => {
    const id = el.id ? '#' + el.id : '';
    const cls = typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '';
    return el.tagName.toLowerCase() + id + cls;
  };
  const items = [];
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || el.closest('svg') || el.closest('option, script, style') || !shown(el)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width >= 0.5 && r.height >= 0.5) items.push({ el, what: JSON.stringify(node.textContent.trim().slice(0, 40)), r });
    }
  }
  for (const el of slide.querySelectorAll('svg, img, canvas, input, select, button, video, iframe')) {
    if (el.tagName.toLowerCase() === 'svg' && el.parentElement.closest('svg')) continue;
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width >= 0.5 && r.height >= 0.5) items.push({ el, what: name(el), r });
  }
  // SVG text: against its outermost svg too (an svg clips what it draws beyond its box).
  for (const t of slide.querySelectorAll('svg text')) {
    if (!t.textContent.trim() || !shown(t)) continue;
    let root = t.ownerSVGElement;
    while (root.parentElement && root.parentElement.closest('svg')) root = root.parentElement.closest('svg');
    const r = t.getBoundingClientRect();
    if (r.width >= 0.5 && r.height >= 0.5) items.push({ el: t, what: JSON.stringify(t.textContent.trim().slice(0, 40)), r, svg: root });
  }
  const problems = [];
  const out = (r, b) => r.left < b.left - 1 || r.top < b.top - 1 || r.right > b.right + 1 || r.bottom > b.bottom + 1;
  const fmt = (r) => `[${Math.round(r.left)},${Math.round(r.top)} ${Math.round(r.width)}×${Math.round(r.height)}]`;
  for (const { el, what, r, svg } of items) {
    if (svg && getComputedStyle(svg).overflow !== 'visible' && out(r, svg.getBoundingClientRect())) {
      problems.push(`${what} ${fmt(r)} cut off by its ${name(svg)} ${fmt(svg.getBoundingClientRect())}`);
      continue;
    }
    // Clipped by an ancestor that hides its overflow; a scrolling ancestor stops the search (its box is checked).
    let clip = null;
    let scroller = null;
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const cs = getComputedStyle(e);
      const o = cs.overflowX + ' ' + cs.overflowY;
      if (/auto|scroll/.test(o) && (e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1)) { scroller = e; break; }
      if (/hidden|clip/.test(o) && e !== slide && !e.matches('.reveal, .slides, .reveal .slides > section')) {
        if (out(r, e.getBoundingClientRect())) { clip = e; break; }
      }
      if (e === slide) break;
    }
    const where = scroller ? scroller.getBoundingClientRect() : r;
    const label = scroller ? `${name(scroller)} (scrolling ${what})` : what;
    if (clip) problems.push(`${label} ${fmt(r)} cut off by ${name(clip)} ${fmt(clip.getBoundingClientRect())}`);
    else if (out(where, view)) problems.push(`${label} ${fmt(where)} outside the viewport ${view.right}×${view.bottom}`);
    else if (out(where, box)) problems.push(`${label} ${fmt(where)} outside the slide ${fmt({ left: box.left, top: box.top, width: box.right - box.left, height: box.bottom - box.top })}`);
  }
  return Array.from(new Set(problems));
}
"""


def cut_off(page, slide: str) -> list[str]:
    """What on the slide's current step is outside the slide or the viewport, or clipped."""
    return page.evaluate(CUT_OFF_JS, slide)
