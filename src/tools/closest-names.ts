/**
 * The names closest to a mistyped one (a tool a model misnamed, a schema keyword a person
 * misspelt), best first: within a small edit distance, or equal once case and separators are ignored.
 */
export function closestNames(name: string, candidates: string[]): string[] {
  const normalise = (text: string) => text.toLowerCase().replace(/[_\-\s]/g, "");
  const wanted = normalise(name);
  return candidates
    .map((candidate) => {
      const plain = normalise(candidate);
      const distance = plain === wanted ? 0 : editDistance(name.toLowerCase(), candidate.toLowerCase());
      const related = wanted.length >= 3 && (plain.includes(wanted) || wanted.includes(plain));
      return { candidate, distance: related ? Math.min(distance, 1) : distance };
    })
    .filter(({ candidate, distance }) => distance <= Math.max(2, Math.floor(candidate.length * 0.4)))
    .sort((a, b) => a.distance - b.distance)
    .map(({ candidate }) => candidate);
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
