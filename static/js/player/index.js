/**
 * Mounts a Player on every `.live-sim` placeholder (slides/macros.html.j2's `live` macro)
 * and starts each one's run when its slide is shown or is next, so → rarely has to wait.
 * Each whose run the estimator can replay gets the "time on" control (cluster.js).
 */
import { Player } from './player.js';
import { attachCluster } from './cluster.js';

function loadD3() {
  if (window.d3) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const script = Object.assign(document.createElement('script'), { src: new URL('../../vendor/d3/d3.min.js', import.meta.url).href });
    script.onload = resolve;
    script.onerror = () => reject(new Error('d3 failed to load'));
    document.head.append(script);
  });
}

const players = [];

function startNearby() {
  const current = document.querySelector('.reveal .slides > section.present');
  if (!current) return;
  const near = [current, current.nextElementSibling];
  for (const player of players) {
    if (near.includes(player.slide)) player.start();
  }
}

await loadD3();
for (const element of document.querySelectorAll('.live-sim')) {
  const player = new Player(element);
  attachCluster(player); // "time on: this machine | N × H100": the run re-timed on a modelled cluster
  players.push(player);
}
document.addEventListener('distdeck:position', startNearby);
startNearby();
window.distdeck = Object.assign(window.distdeck || {}, { players });
