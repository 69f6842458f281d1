/**
 * A form built from a list of field descriptions, shared by the memory calculator and the layout
 * chooser: { name, label, type: 'select' | 'number' | 'checkbox', options, min, max, step, value, placeholder };
 * a select's options are values, or [value, text] pairs.
 * Keys typed into the form are for the form, not for the deck's navigation.
 */
export function buildForm(form, fields, initial, onChange, { labelClass = () => '', width = () => '5.5em',
                                                            inheritFont = false } = {}) {
  const inputs = {};
  for (const field of fields) {
    const label = document.createElement('label');
    const className = labelClass(field);
    if (className) label.className = className;
    label.append(document.createTextNode(`${field.label} `));
    let input;
    if (field.type === 'select') {
      input = document.createElement('select');
      // an option is its value, or [value, what the audience reads]
      for (const option of field.options) {
        const [value, text] = Array.isArray(option) ? option : [option, option];
        input.append(new Option(text, value));
      }
    } else {
      input = Object.assign(document.createElement('input'), { type: field.type ?? 'number' });
      if (field.min != null) input.min = field.min;
      if (field.max != null) input.max = field.max;
      if (field.step) input.step = field.step;
      if (field.placeholder) input.placeholder = field.placeholder;
      if (input.type === 'number') input.style.width = width(field);
    }
    if (inheritFont) input.style.font = 'inherit';
    input.name = field.name;
    const start = initial[field.name] ?? field.value;
    if (input.type === 'checkbox') input.checked = Boolean(start);
    else if (start != null) input.value = String(start);
    input.addEventListener('change', onChange);
    input.addEventListener('keydown', (event) => event.stopPropagation());
    label.append(input);
    form.append(label);
    inputs[field.name] = input;
  }
  form.addEventListener('submit', (event) => { event.preventDefault(); onChange(); });
  return inputs;
}
