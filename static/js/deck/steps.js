/**
 * Steps inside a slide: → plays a slide's steps before leaving it, ← steps back.
 *
 * Contract (static/js/player relies on it):
 *   registerStepper(slideSection, stepper)      also window.distdeck.registerStepper
 *   stepper = { count, index, go(k), pending }  count may grow while frames stream in;
 *                                               pending is true while more steps may arrive
 *   window.distdeck.stepsChanged(slideSection)   call after count/pending change
 *
 * Static slides declare steps in markup, <section data-steps="K"> and data-step="k" on the
 * parts shown from step k on, and get a stepper from staticStepper(). → at the last step of a
 * pending stepper waits (and takes the next step as soon as it arrives) instead of leaving.
 */

const steppers = new WeakMap();
let reveal = null;
// A step asked for before it exists (deep link to a live slide): applied on stepsChanged.
let wanted = null;
// → was pressed at the last step while more steps were pending.
let waitingForward = false;

export function registerStepper(slide, stepper) {
  steppers.set(slide, stepper);
  if (reveal && slide === reveal.getCurrentSlide()) settle(slide, 'forward');
  notify(slide);
}

export function stepperOf(slide) {
  return steppers.get(slide) ?? null;
}

export function stepsChanged(slide) {
  const stepper = steppers.get(slide);
  if (stepper && reveal && slide === reveal.getCurrentSlide()) {
    if (wanted && wanted.slide === slide) {
      applyWanted(slide, stepper);
    } else if (waitingForward && stepper.index < stepper.count - 1) {
      waitingForward = false;
      stepper.go(stepper.index + 1);
    } else if (waitingForward && !stepper.pending) {
      waitingForward = false; // the stream ended: the next → leaves the slide
    }
  }
  notify(slide);
}

/** A stepper for a slide that declares its steps in markup. */
export function staticStepper(slide) {
  const parts = Array.from(slide.querySelectorAll('[data-step]'));
  const stepper = {
    count: Math.max(1, parseInt(slide.dataset.steps, 10) || 1),
    index: 0,
    pending: false,
    go(k) {
      this.index = Math.max(0, Math.min(k, this.count - 1));
      for (const part of parts) {
        const at = parseInt(part.dataset.step, 10);
        part.classList.toggle('step-shown', at <= this.index);
        part.classList.toggle('step-current', at === this.index);
      }
      slide.dataset.currentStep = String(this.index);
    },
  };
  stepper.go(0);
  return stepper;
}

export function next({ skipSteps = false } = {}) {
  const slide = reveal.getCurrentSlide();
  const stepper = steppers.get(slide);
  wanted = null;
  if (!skipSteps && stepper && stepper.index < stepper.count - 1) {
    waitingForward = false;
    stepper.go(stepper.index + 1);
    notify(slide);
  } else if (!skipSteps && stepper && stepper.pending) {
    waitingForward = true;
    notify(slide);
  } else {
    reveal.next();
  }
}

export function prev({ skipSteps = false } = {}) {
  const slide = reveal.getCurrentSlide();
  const stepper = steppers.get(slide);
  wanted = null;
  waitingForward = false;
  if (!skipSteps && stepper && stepper.index > 0) {
    stepper.go(stepper.index - 1);
    notify(slide);
  } else {
    reveal.prev();
  }
}

/** Show `slide` at `step` (clamped; or later, if a pending stepper has not got there yet). */
export function goTo(slide, step = 0) {
  waitingForward = false;
  wanted = { slide, step: Math.max(0, step) };
  if (slide === reveal.getCurrentSlide()) {
    applyWanted(slide, steppers.get(slide));
    notify(slide);
  } else {
    reveal.slide(reveal.getIndices(slide).h); // slidechanged applies `wanted`
  }
}

export function slideIndex(slide) {
  return reveal.getIndices(slide).h;
}

/** Where the deck is: what the top bar, the URL, the announcer and the embed API report. */
export function position(slide = reveal.getCurrentSlide() ?? reveal.getSlides()[0]) {
  const stepper = steppers.get(slide);
  return {
    slide,
    id: slide.id,
    title: slide.dataset.title || '',
    section: slide.dataset.section || '',
    slideIndex: slideIndex(slide),
    slideCount: reveal.getTotalSlides(),
    step: stepper ? stepper.index : 0,
    stepCount: stepper ? stepper.count : 1,
    pending: Boolean(stepper && stepper.pending),
    waiting: waitingForward,
    wantedStep: wanted && wanted.slide === slide ? wanted.step : null,
  };
}

function applyWanted(slide, stepper) {
  if (!wanted || wanted.slide !== slide) return;
  if (!stepper) {
    // A live slide's player registers its stepper once it has mounted: keep the wish till then.
    if (!slide.querySelector('.live-sim')) wanted = null;
  } else if (wanted.step < stepper.count) {
    stepper.go(wanted.step);
    wanted = null;
  } else if (!stepper.pending) {
    stepper.go(Math.max(0, stepper.count - 1));
    wanted = null;
  } // else: keep waiting for the step to stream in
}

function settle(slide, direction) {
  const stepper = steppers.get(slide);
  if (wanted && wanted.slide === slide) {
    applyWanted(slide, stepper);
  } else if (stepper && stepper.count > 0) {
    stepper.go(direction === 'backward' ? stepper.count - 1 : 0);
  }
}

function notify(slide) {
  if (!reveal || !slide || slide !== reveal.getCurrentSlide()) return;
  document.dispatchEvent(new CustomEvent('distdeck:position', { detail: position(slide) }));
}

/** Wire steps to a reveal.js instance (called once by boot.js, before Reveal.initialize). */
export function attach(revealInstance) {
  reveal = revealInstance;
  for (const slide of document.querySelectorAll('.reveal .slides section[data-steps]')) {
    if (!steppers.has(slide)) steppers.set(slide, staticStepper(slide));
  }
  reveal.on('slidechanged', (event) => {
    if (!event.currentSlide) return; // reveal's scroll view can report a change before it has a slide
    waitingForward = false;
    if (wanted && wanted.slide !== event.currentSlide) wanted = null;
    const backward = event.previousSlide && slideIndex(event.previousSlide) > slideIndex(event.currentSlide);
    settle(event.currentSlide, backward ? 'backward' : 'forward');
    notify(event.currentSlide);
  });
  reveal.on('ready', (event) => {
    settle(event.currentSlide, 'forward');
    notify(event.currentSlide);
  });
}

window.distdeck = Object.assign(window.distdeck || {}, { registerStepper, stepsChanged, stepperOf });
