/**
 * Starts a widget page (/embed/<scenario>: one live simulation, a one-slide deck in embed mode):
 * reveal.js and our controllers (core.js), drawn at the frame's size. Only what one widget needs:
 * no formulas, no speaker view, no print (boot.js has them for the deck).
 */
import { Reveal, begin, embedding, ready, revealOptions, wire } from './core.js';
import * as embed from './embed.js';
import { nextTask } from '../tasks.js';

embed.chooseWidgetViews(); // before the player mounts (the next module script)
begin();
await nextTask(); // the modules' evaluation, then reveal.js's start: two long tasks on a phone, not one
// Keys only while this frame has the focus (a click gives it).
await Reveal.initialize(revealOptions({ size: embed.widgetSize(), margin: 0, keyboardCondition: () => embed.hasKeyboard() }));
window.addEventListener('resize', () => Reveal.configure(embed.widgetSize()));
wire();
embedding({ chrome: true });
ready();
