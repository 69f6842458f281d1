/**
 * The network view (basics): the layers as columns of neurons, each coloured by its real value for
 * the first sample of the batch (inputs, tanh activations, prediction); the weights as edges, their
 * width and colour the weight's size and sign, or in backward the gradient's; the error signal of
 * each neuron in backward; the SGD step's worked example; the batch as a table and the loss per step.
 */
import { value } from '../format.js';

const TOP = 56;

const fmt = (v) => (v == null ? '' : (Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2)));

function phaseOf(frame) {
  const p = frame.phase;
  return {
    hidden: ['forward_hidden', 'forward_output', 'loss', 'backward_output', 'backward_hidden', 'trained'].includes(p),
    output: ['forward_output', 'loss', 'backward_output', 'backward_hidden', 'trained'].includes(p),
    loss: ['loss', 'backward_output', 'backward_hidden'].includes(p),
    gradLayer: p === 'backward_output' ? 2 : p === 'backward_hidden' ? 1 : p === 'sgd' ? 0 : null,
  };
}

export function render(svg, { frame, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  // The network on the left, the batch and the loss on the right, two lines of footer under both.
  const NW = Math.max(420, W * 0.6);
  const COLS = [60, NW * 0.48, NW - 80];
  const BOTTOM = H - 84;
  const TABLE = { x: NW + 10, y: 32 };
  const e = frame.extra ?? {};
  if (!e.layers) return;
  const [nIn, nHid, nOut] = e.layers;
  const show = phaseOf(frame);
  const acts = e.activations ?? {};
  const sample = 0;
  const ys = (n) => d3.range(n).map((i) => TOP + ((i + 0.5) * (BOTTOM - TOP)) / n);
  const pos = [ys(nIn).map((y) => [COLS[0], y]), ys(nHid).map((y) => [COLS[1], y]), ys(nOut).map((y) => [COLS[2], y])];
  const r = Math.min(34, (BOTTOM - TOP) / Math.max(nIn, nHid) / 2 - 6);

  // Values shown in the neurons (first sample), and their colour scale.
  const neuronValues = [
    e.x[sample],
    show.hidden && acts.h ? acts.h[sample] : null,
    show.output && acts.y_hat ? [acts.y_hat[sample]] : null,
  ];
  const vmax = d3.max(neuronValues.flat().filter((v) => v != null), (v) => Math.abs(v)) || 1;
  const vcolor = d3.scaleSequential(d3.interpolateRdBu).domain([vmax, -vmax]);

  // Edges: weights, or this frame's gradients in backward (and in the SGD frame, the new weights).
  const grads = e.grads ?? {};
  const useGrad = (layer) => show.gradLayer != null && show.gradLayer !== 0 && (layer === 2 || show.gradLayer === 1)
    && grads[`W${layer}`];
  const edges = [];
  for (const layer of [1, 2]) {
    const matrix = useGrad(layer) ? grads[`W${layer}`] : e.weights[`W${layer}`];
    matrix.forEach((row, j) => row.forEach((w, i) => edges.push({
      layer, i, j, w, grad: Boolean(useGrad(layer)), name: `W${layer}[${j},${i}]`,
      from: pos[layer - 1][i], to: pos[layer][j],
    })));
  }
  const emax = (grad) => d3.max(edges.filter((d) => d.grad === grad), (d) => Math.abs(d.w)) || 1;
  const widths = { true: emax(true), false: emax(false) };
  const eg = svg.append('g').attr('class', 'edges');
  const example = frame.phase === 'sgd' ? e.example?.name : null;
  for (const d of edges) {
    const color = d.grad ? (d.w >= 0 ? 'var(--role-grads, #7ee07e)' : 'var(--danger, #ff6b6b)')
      : (d.w >= 0 ? 'var(--accent, #5cc8ff)' : 'var(--role-optimizer, #ffb454)');
    const flatIndex = d.j * e.layers[d.layer - 1] + d.i;
    const isExample = example === `W${d.layer}[${flatIndex}]` || (example === `W${d.layer}` && flatIndex === 0);
    eg.append('line').attr('data-key', `e-${d.layer}-${d.i}-${d.j}`).attr('x1', d.from[0] + r).attr('y1', d.from[1]).attr('x2', d.to[0] - r).attr('y2', d.to[1])
      .attr('stroke', isExample ? 'var(--fg, #e8eaed)' : color)
      .attr('stroke-width', 0.8 + 6 * Math.abs(d.w) / widths[d.grad])
      .attr('opacity', isExample ? 1 : 0.8)
      .append('title').text(`${d.name} ${d.grad ? 'gradient' : 'weight'} ${value(d.w)}`);
  }
  // Edge labels only when few enough to read.
  if (edges.length <= 12) {
    for (const d of edges) {
      // Near the end where the edges fan out (they converge on the other), so labels keep apart.
      const t = d.layer === 1 ? 0.72 : 0.3;
      const lx = d.from[0] + r + t * (d.to[0] - d.from[0] - 2 * r);
      const ly = d.from[1] + t * (d.to[1] - d.from[1]);
      eg.append('text').attr('class', 'tensor-note').attr('x', lx).attr('y', ly + 6).attr('text-anchor', 'middle')
        .style('font-size', '19px').style('paint-order', 'stroke').style('stroke', 'var(--bg-raised, #181c25)')
        .style('stroke-width', '5px').text(fmt(d.w));
    }
  }

  // Neurons.
  const ng = svg.append('g').attr('class', 'neurons');
  const signals = e.signals ?? {};
  pos.forEach((col, layer) => col.forEach(([cx, cy], k) => {
    const v = neuronValues[layer]?.[k];
    const g = ng.append('g').attr('data-key', `n-${layer}-${k}`).attr('transform', `translate(${cx},${cy})`);
    g.append('circle').attr('r', r).attr('fill', v == null ? 'var(--bg, #10131a)' : vcolor(v))
      .attr('stroke', 'var(--rule, #2a3040)').attr('stroke-width', 2)
      .append('title').text(v == null ? 'not computed yet' : value(v));
    if (v != null) {
      g.append('text').attr('text-anchor', 'middle').attr('y', 7).style('font-size', `${r > 26 ? 21 : 17}px`)
        .style('fill', Math.abs(v) > vmax * 0.6 ? '#fff' : '#111').text(fmt(v));
    }
    const signal = layer === 2 ? signals.output?.[k] : layer === 1 ? signals.hidden?.[k] : null;
    if (signal != null) {
      g.append('circle').attr('r', r + 5).attr('fill', 'none').attr('stroke', 'var(--role-grads, #7ee07e)')
        .attr('stroke-width', 3);
      g.append('text').attr('class', 'tensor-note').attr('x', 0).attr('y', -r - 11)
        .attr('text-anchor', 'middle').style('fill', 'var(--role-grads, #7ee07e)').style('font-size', '19px')
        .text(`δ ${fmt(signal)}`);
    }
  }));
  const heads = ['x (input)', 'h = tanh(W1·x+b1)', 'ŷ = W2·h+b2'];
  heads.forEach((t, i) => svg.append('text').attr('class', 'legend-label').attr('x', COLS[i]).attr('y', 26)
    .attr('text-anchor', i ? 'middle' : 'start').attr('dx', i ? 0 : -r).style('font-size', '21px').text(t));

  // Loss box beside the output, with the target.
  if (show.output) {
    const [ox, oy] = pos[2][0];
    svg.append('text').attr('class', 'tensor-note').attr('x', ox).attr('y', oy + r + 26).attr('text-anchor', 'middle')
      .style('font-size', '20px').text(`target y = ${fmt(e.y[sample])}`);
  }
  if (show.loss && e.loss != null) {
    const [ox, oy] = pos[2][0];
    svg.append('text').attr('class', 'rank-title').attr('x', ox).attr('y', oy + r + 60).attr('text-anchor', 'middle')
      .style('font-size', '26px').text(`L = ${value(e.loss)}`);
  }

  // Footer: what this frame computes, with real numbers.
  const foot = svg.append('text').attr('class', 'legend-label').attr('x', 16).attr('y', H - 40).style('font-size', '20px');
  if (frame.phase === 'sgd' && e.example) {
    const ex = e.example;
    foot.attr('class', 'transfer-label')
      .text(`${ex.name} ← ${fmt4(ex.w)} − ${ex.lr}·(${fmt4(ex.g)}) = ${fmt4(ex.new)}`);
  } else if (show.gradLayer) {
    foot.text(`edges: dL/dW${show.gradLayer === 2 ? '2' : '1, dL/dW2'} (green +, red −); δ = Σ over the batch of dL/dz`);
  } else {
    foot.text('edges: weights (blue +, orange −)');
  }
  svg.append('text').attr('class', 'legend-label').attr('x', 16).attr('y', H - 12).style('font-size', '20px')
    .text(`step ${Math.min(e.step + 1, e.steps)}/${e.steps} · η = ${e.lr} · neurons show sample 1 of ${e.batch}`);

  // The batch: x, y and the prediction, every sample.
  const tb = svg.append('g').attr('transform', `translate(${TABLE.x},${TABLE.y})`);
  const cols = [...d3.range(nIn).map((i) => `x${i + 1}`), 'y', ...(show.output ? ['ŷ'] : [])];
  const cw = Math.min(72, (W - TABLE.x - 10) / cols.length);
  cols.forEach((c, i) => tb.append('text').attr('class', 'legend-label').attr('x', i * cw + cw - 4).attr('y', 0)
    .attr('text-anchor', 'end').style('font-size', '20px').text(c));
  const rowH = Math.max(26, Math.min(30, 220 / e.batch));
  e.x.forEach((row, s) => {
    const cells = [...row, e.y[s], ...(show.output ? [acts.y_hat[s]] : [])];
    cells.forEach((v, i) => tb.append('text').attr('class', i === nIn + 1 ? 'tensor-name' : 'tensor-note')
      .attr('x', i * cw + cw - 4).attr('y', 32 + s * rowH).attr('text-anchor', 'end')
      .style('font-size', '20px').text(fmt(v)));
  });

  // Loss per step so far.
  const losses = e.final_loss != null ? [...e.losses, e.final_loss] : e.losses;
  if (losses.length) {
    const tableEnd = TABLE.y + 32 + e.batch * rowH;
    const boxTop = Math.max(tableEnd + 60, BOTTOM - 130);
    const box = { x: TABLE.x + 20, y: boxTop, w: W - TABLE.x - 50, h: Math.max(50, BOTTOM - boxTop - 10) };
    const lx = d3.scaleLinear().domain([0, Math.max(1, e.steps)]).range([box.x, box.x + box.w]);
    const ly = d3.scaleLinear().domain([0, d3.max(losses)]).nice().range([box.y + box.h, box.y]);
    const lg = svg.append('g').attr('class', 'loss-chart');
    lg.append('text').attr('class', 'legend-label').attr('x', box.x - 10).attr('y', box.y - 34).style('font-size', '20px').text('loss at each step');
    lg.append('g').attr('class', 'axis').attr('transform', `translate(0,${box.y + box.h})`)
      .call(d3.axisBottom(lx).ticks(Math.min(10, e.steps)).tickFormat((t) => `${t + 1}`));
    lg.append('path').attr('d', d3.line().x((_, i) => lx(i)).y((v) => ly(v))(losses))
      .attr('fill', 'none').attr('stroke', 'var(--accent, #5cc8ff)').attr('stroke-width', 2.5);
    lg.selectAll('circle').data(losses).join('circle').attr('cx', (_, i) => lx(i)).attr('cy', (v) => ly(v)).attr('r', 4)
      .attr('fill', 'var(--accent, #5cc8ff)').append('title').text((v, i) => `step ${i + 1}: ${value(v)}`);
    const lastX = lx(losses.length - 1);
    lg.append('text').attr('class', 'bar-total').attr('x', lastX + (lastX > box.x + box.w - 60 ? -10 : 10))
      .attr('y', ly(losses[losses.length - 1]) + (losses.length > 1 ? -10 : 6))
      .attr('text-anchor', lastX > box.x + box.w - 60 ? 'end' : 'start').text(value(losses[losses.length - 1]));
  }
  svg.attr('data-phase', frame.phase).attr('aria-label', `A ${e.layers.join('–')} network: ${frame.caption}`);
}

function fmt4(v) {
  return v.toFixed(4);
}
