/**
 * A list whose links live on its items, for the worker's per-job bookkeeping (held leases,
 * running executions): adding and removing an item are a few assignments, with no hash, no key
 * and no table that grows, shrinks and is rebuilt as a drain adds and removes thousands of items a
 * second. The price is that an item is found by walking, so it suits sets that are walked (a
 * heartbeat batch, a shutdown) and searched only on rare paths (a lost lease).
 */

/** The links an item of an {@link IntrusiveList} carries; only the list sets them. */
export interface ListLinks<T> {
  previous: T | undefined;
  next: T | undefined;
}

/** Items in the order they were appended. Each item may be in at most one list at a time. */
export class IntrusiveList<T extends ListLinks<T>> {
  private head: T | undefined;
  private tail: T | undefined;
  private count = 0;

  /** How many items the list holds. */
  get size(): number {
    return this.count;
  }

  /** The oldest item, if any. */
  get first(): T | undefined {
    return this.head;
  }

  /** Appends an item that is in no list. */
  append(item: T): void {
    item.previous = this.tail;
    item.next = undefined;
    if (this.tail) this.tail.next = item;
    else this.head = item;
    this.tail = item;
    this.count += 1;
  }

  /** Removes an item the caller knows is in this list (its own flag or state says so). */
  remove(item: T): void {
    if (item.previous) item.previous.next = item.next;
    else this.head = item.next;
    if (item.next) item.next.previous = item.previous;
    else this.tail = item.previous;
    item.previous = undefined;
    item.next = undefined;
    this.count -= 1;
  }

  /** The items now, oldest first: a copy, so removing items while going through it is safe. */
  toArray(): T[] {
    const items: T[] = [];
    for (let item = this.head; item; item = item.next) items.push(item);
    return items;
  }

  /** The first item, oldest first, for which `matches` is true. */
  find(matches: (item: T) => boolean): T | undefined {
    for (let item = this.head; item; item = item.next) if (matches(item)) return item;
    return undefined;
  }
}
