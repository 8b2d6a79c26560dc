/**
 * A step's request by reference: the numbers (within its run) of the messages it was sent, written
 * as ranges ("1-40,43"), as both stores keep them.
 */

/** [1,2,3,5,7,8] as "1-3,5,7-8". */
export function rangesOf(seqs: number[]): string {
  const ranges: string[] = [];
  for (let index = 0; index < seqs.length; ) {
    const first = seqs[index] as number;
    let last = first;
    while (seqs[index + 1] === last + 1) last = seqs[++index] as number;
    ranges.push(first === last ? String(first) : `${first}-${last}`);
    index++;
  }
  return ranges.join(",");
}

export function seqsOf(ranges: string): number[] {
  if (ranges === "") return [];
  return ranges.split(",").flatMap((range) => {
    const [first, last = first] = range.split("-").map(Number) as [number, number?];
    return Array.from({ length: (last as number) - first + 1 }, (_, offset) => first + offset);
  });
}
