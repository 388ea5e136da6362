// Building the page from data without innerHTML: text goes in as text nodes, never as markup.
export function h(tag, attrs = {}, ...children) {
  const el = tag === 'svg' || attrs.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false || name === 'svg') continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'value') el.value = value;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity))
    if (child !== undefined && child !== null && child !== false) el.append(child instanceof Node ? child : String(child));
  return el;
}

export const svg = (tag, attrs = {}, ...children) => h(tag, { ...attrs, svg: true }, ...children);

export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', {}, hint) : null);
}

export function table(caption, headers, rows) {
  return h(
    'table',
    {},
    h('caption', {}, caption),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((text) => h('th', { scope: 'col' }, text)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.length
        ? rows.map((cells) =>
            h(
              'tr',
              {},
              cells.map((c) => h('td', {}, c)),
            ),
          )
        : h('tr', {}, h('td', { colspan: headers.length }, 'None.')),
    ),
  );
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

/** A modal dialog (Escape closes it; focus returns to where it was). Resolves with the button's value. */
export function modal(title, body, buttons) {
  const dialog = document.getElementById('dialog');
  const opener = document.activeElement;
  dialog.replaceChildren(
    h('h2', { id: 'dialog-title' }, title),
    body,
    h(
      'form',
      { method: 'dialog', class: 'actions' },
      buttons.map((b) => h('button', { value: b.value, class: b.class }, b.label)),
    ),
  );
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        if (opener instanceof HTMLElement) opener.focus();
        resolve(dialog.returnValue);
      },
      { once: true },
    );
  });
}

export async function confirmAction(title, text, confirmLabel) {
  const answer = await modal(title, h('p', {}, text), [
    { value: 'cancel', label: 'Cancel' },
    { value: 'yes', label: confirmLabel, class: 'danger' },
  ]);
  return answer === 'yes';
}

export function announce(text, kind = 'ok') {
  const status = document.getElementById('status');
  status.className = kind;
  status.textContent = text;
}
