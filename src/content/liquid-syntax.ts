/** Every Liquid tag (`{% … %}`) and output (`{{ … }}`) of a template's source, whitespace control included. */
export const LIQUID = /\{\{-?[\s\S]*?-?\}\}|\{%-?[\s\S]*?-?%\}/g;

// Positions in a template's source, as every message about one names them. Lines end as text editors
// end them: at `\n`, `\r\n` or a lone `\r` (liquidjs counted only `\n`, so an old-Mac template was all
// line 1). The line starts are found once per source and searched (binary search), so naming the
// line of every variable of a large template stays linear (liquidjs scanned from the start each time:
// a 480 KB html with 8,000 outputs took 8 s to check).
let lineIndex: { input: string; starts: number[] } | undefined;
const LINE_BREAK = /\r\n?|\n/g;
const lineStarts = (input: string): number[] => {
  if (lineIndex?.input !== input) {
    const starts = [0];
    for (const m of input.matchAll(LINE_BREAK)) starts.push(m.index + m[0].length);
    lineIndex = { input, starts };
  }
  return lineIndex.starts;
};

/** The line and the column (both from 1) of position `at` of `source`. */
export const positionOf = (source: string, at: number): [line: number, column: number] => {
  const starts = lineStarts(source);
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if ((starts[mid] ?? 0) <= at) low = mid;
    else high = mid - 1;
  }
  return [low + 1, at - (starts[low] ?? 0) + 1];
};

/** The position in `source` of a line and a column (both from 1), as positionOf gives them. */
export const offsetOf = (source: string, line: number, column: number): number => (lineStarts(source)[line - 1] ?? 0) + column - 1;

/** The line (from 1) of position `at` of `source`. */
export const lineOf = (source: string, at: number): number => positionOf(source, at)[0];
