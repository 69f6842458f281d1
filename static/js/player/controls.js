/**
 * The compact control row under a live simulation: one input per parameter the slide
 * names, built from the scenario's JSON Schema (bounds, choices), so the browser checks
 * what it can and the server's 422 explains the rest.
 */

function fieldSchema(schema, name) {
  const field = schema.properties?.[name] ?? {};
  if (field.$ref) return schema.$defs?.[field.$ref.split('/').pop()] ?? field;
  if (field.allOf?.[0]?.$ref) return { ...schema.$defs?.[field.allOf[0].$ref.split('/').pop()], ...field };
  return field;
}

function labelFor(name, field) {
  return field.description ?? name.replace(/_/g, ' ');
}

// The mesh's dimensions multiply to the ranks a run needs: a value whose product with the others
// is more than the pool runs is not offered (the server would refuse it with a 422).
const MESH_DIMS = ['dp', 'pp', 'tp'];

function offerOnlyRunnable(container, schema) {
  const selects = MESH_DIMS.map((dim) => container.querySelector(`select[name=${dim}]`)).filter(Boolean);
  if (selects.length < 2) return;
  const limit = Math.min(...selects.map((el) => fieldSchema(schema, el.name).maximum ?? Infinity));
  const update = () => {
    for (const el of selects) {
      const others = selects.filter((o) => o !== el).reduce((acc, o) => acc * Number(o.value), 1);
      for (const option of el.options) {
        if (option.dataset.recorded === 'false') continue;
        option.disabled = Number(option.value) * others > limit;
      }
    }
  };
  for (const el of selects) el.addEventListener('change', update);
  update();
}

/**
 * `choices(name)`: the values a static export recorded for this control (null: any value). A
 * number becomes a choice among them; an enum's other values are shown disabled. A small range
 * of integers is a choice too, so values that cannot run can be left out.
 */
export function buildControls(container, schema, names, values, onChange, { choices = () => null } = {}) {
  container.replaceChildren();
  for (const name of names) {
    const field = fieldSchema(schema, name);
    const label = document.createElement('label');
    label.className = 'sim-control';
    const caption = document.createElement('span');
    caption.textContent = name.replace(/_/g, ' ');
    label.title = labelFor(name, field);
    let input;
    const recorded = field.type === 'boolean' ? null : choices(name);
    const smallRange = field.type === 'integer' && field.minimum !== undefined && field.maximum !== undefined
      && field.maximum - field.minimum <= 16
      ? Array.from({ length: field.maximum - field.minimum + 1 }, (_, i) => field.minimum + i) : null;
    if (field.enum || recorded || smallRange) {
      input = document.createElement('select');
      for (const option of field.enum ?? recorded ?? smallRange) {
        const el = document.createElement('option');
        el.value = option;
        // An enum's value is an id (all_to_all, interleaved_1f1b): shown as words, sent as the id.
        el.textContent = typeof option === 'string' ? option.replace(/_/g, '-') : option;
        if (recorded && !recorded.includes(option)) {
          el.disabled = true;
          el.dataset.recorded = 'false';
          el.textContent = `${el.textContent} (live server only)`;
        }
        input.append(el);
      }
      const everyValue = field.type === 'integer' && field.maximum - field.minimum + 1 <= recorded?.length;
      if (recorded && !field.enum && !everyValue) { // a number: say that the others exist, on the live server
        input.append(Object.assign(document.createElement('option'), { disabled: true, textContent: 'others: live server only' }));
        label.title = `${label.title}. This copy recorded ${recorded.join(', ')}; other values need the live server.`;
      }
      input.value = values[name];
    } else if (field.type === 'boolean') {
      input = document.createElement('input');
      input.type = 'checkbox';
      input.checked = Boolean(values[name]);
    } else {
      input = document.createElement('input');
      input.type = 'number';
      if (field.minimum !== undefined) input.min = field.minimum;
      if (field.maximum !== undefined) input.max = field.maximum;
      input.step = field.type === 'integer' ? '1' : 'any';
      input.value = values[name];
    }
    input.name = name;
    input.addEventListener('change', () => {
      const raw = input.type === 'checkbox' ? input.checked : input.value;
      const next = field.type === 'integer' || field.type === 'number' ? Number(raw) : raw;
      onChange(name, next);
    });
    // Keys typed into a control are for the control, not for the deck's navigation.
    input.addEventListener('keydown', (event) => event.stopPropagation());
    label.append(caption, input);
    container.append(label);
  }
  offerOnlyRunnable(container, schema);
}
