import { describe, expect, it } from 'vitest';
import { IntrusiveList, type ListLinks } from '../../src/worker/intrusive-list.js';

class Item implements ListLinks<Item> {
  previous: Item | undefined = undefined;
  next: Item | undefined = undefined;
  constructor(readonly name: string) {}
}

const names = (list: IntrusiveList<Item>) => list.toArray().map((item) => item.name);

describe('IntrusiveList', () => {
  it('keeps items in the order appended and removes any of them: first, middle or last', () => {
    const list = new IntrusiveList<Item>();
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => new Item(name)) as [Item, Item, Item, Item];
    for (const item of [a, b, c, d]) list.append(item);
    expect(names(list)).toEqual(['a', 'b', 'c', 'd']);
    list.remove(b);
    expect(names(list)).toEqual(['a', 'c', 'd']);
    list.remove(a);
    expect(list.first).toBe(c);
    list.remove(d);
    expect(names(list)).toEqual(['c']);
    expect(list.size).toBe(1);
    // A removed item carries no links and can join again, at the end.
    expect(b.previous).toBeUndefined();
    expect(b.next).toBeUndefined();
    list.append(b);
    list.append(a);
    expect(names(list)).toEqual(['c', 'b', 'a']);
    list.remove(c);
    list.remove(b);
    list.remove(a);
    expect(list.size).toBe(0);
    expect(list.first).toBeUndefined();
    expect(names(list)).toEqual([]);
  });

  it('hands out a copy, so items can be removed while it is gone through, and finds the first match', () => {
    const list = new IntrusiveList<Item>();
    const items = ['a', 'b', 'c'].map((name) => new Item(name));
    for (const item of items) list.append(item);
    for (const item of list.toArray()) list.remove(item);
    expect(list.size).toBe(0);
    for (const item of items) list.append(item);
    expect(list.find((item) => item.name !== 'a')?.name).toBe('b');
    expect(list.find((item) => item.name === 'z')).toBeUndefined();
  });
});
