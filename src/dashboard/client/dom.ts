/**
 * Building the page from data, safely: every value goes in as text (`textContent`, attribute
 * values), never as markup, so a job payload holding `<img src=x onerror=…>` is shown, not run.
 * There is no `innerHTML` anywhere in the dashboard; the CSP refuses inline script besides.
 */

/** A child: a node, text (rendered as text), or nothing. */
export type Child = Node | string | number | null | undefined | false;

/** Attributes (`class`, `aria-*`, …) and event listeners (`onclick`, …) of {@link el}. */
export type Props = Record<string, string | number | boolean | null | undefined | EventListener>;

/** Appends children to `node` as nodes or text nodes. */
export function append(node: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

function applyProps(node: Element, props: Props): void {
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'style') throw new Error('the CSP forbids inline styles: use a class');
    if (name.startsWith('on') && typeof value === 'function') {
      node.addEventListener(name.slice(2), value);
    } else if (name === 'value' && 'value' in node) {
      (node as HTMLInputElement).value = String(value);
    } else {
      node.setAttribute(name, value === true ? '' : String(value));
    }
  }
}

/** An HTML element with `props` and `children` (text stays text). */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  applyProps(node, props);
  append(node, children);
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element (charts are drawn as inline SVG by chart.ts). */
export function svg(tag: string, props: Props = {}, ...children: Child[]): SVGElement {
  const node = document.createElementNS(SVG_NS, tag);
  applyProps(node, props);
  append(node, children);
  return node;
}

/** Replaces the children of `node`. */
export function replace(node: Node, ...children: Child[]): void {
  while (node.firstChild) node.removeChild(node.firstChild);
  append(node, children);
}

/** A labelled field: the label wraps its control, so a click on the label focuses it. */
export function field(label: string, control: HTMLElement): HTMLLabelElement {
  return el('label', {}, label, control);
}

/** A table with a header row; `numeric` columns are right-aligned. */
export function table(
  caption: string,
  headers: readonly string[],
  rows: readonly Child[][],
  numeric: readonly number[] = [],
) {
  // A wide table scrolls sideways on a phone: the scroller is focusable and named, so a keyboard
  // user can scroll it too (axe: scrollable-region-focusable).
  return el(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    el(
      'table',
      {},
      el('caption', { class: 'visually-hidden' }, caption),
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ...headers.map((h, i) => el('th', { scope: 'col', class: numeric.includes(i) ? 'num' : null }, h)),
        ),
      ),
      el(
        'tbody',
        {},
        ...rows.map((row) =>
          el('tr', {}, ...row.map((cell, i) => el('td', { class: numeric.includes(i) ? 'num' : null }, cell))),
        ),
      ),
    ),
  );
}

/** A state or flag shown as a small badge, coloured by class. */
export function badge(text: string, kind: string = text): HTMLSpanElement {
  return el('span', { class: `badge ${kind}` }, text);
}
