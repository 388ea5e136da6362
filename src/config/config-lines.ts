import { isMap, isScalar, isSeq, type Document, type LineCounter } from 'yaml';

/** The line (from 1) of a field in a config file, given its path (`['gateway', 'port']`), or undefined. */
export type LineOf = (path: readonly PropertyKey[]) => number | undefined;

/**
 * Lines of a parsed YAML document: the field's key (`port:`), an item's first line in a list, or,
 * for a field that is not there (a required one left out), the line of the nearest enclosing
 * field that is.
 */
export function lineLocator(doc: Document, counter: LineCounter): LineOf {
  const lineAt = (offset: number | undefined) => (offset === undefined ? undefined : counter.linePos(offset).line);
  return (path) => {
    for (let depth = path.length; depth > 0; depth--) {
      const parent = depth === 1 ? doc.contents : doc.getIn(path.slice(0, depth - 1), true);
      const segment = String(path[depth - 1]);
      if (isMap(parent)) {
        const pair = parent.items.find((item) => (isScalar(item.key) ? String(item.key.value) : String(item.key)) === segment);
        const node = (pair?.key ?? pair?.value) as { range?: [number, number, number] } | undefined;
        if (node?.range) return lineAt(node.range[0]);
      } else if (isSeq(parent) && /^\d+$/.test(segment)) {
        const item = parent.items[Number(segment)] as { range?: [number, number, number] } | undefined;
        if (item?.range) return lineAt(item.range[0]);
      }
    }
    return lineAt((doc.contents as { range?: [number, number, number] } | null)?.range?.[0]);
  };
}
