// Keeps the newest message, and any approval card, in view as content arrives, as chat apps do —
// unless the person has scrolled up to read: then nothing moves, and a button offers the way back.

/** How close to the end (in px) still counts as being at the newest message. */
const NEAR_END = 48;
const MARGIN = 8;
export const NEWS = "New messages";
export const APPROVAL_NEWS = "Approval needed";

/**
 * `jump`: the button shown while something new waits below; `composer`: the sticky box at the
 * bottom, which covers what is behind it.
 */
export function createFollower(jump, composer) {
  let following = true;
  let scheduled = false;
  /** Where the page last scrolled itself: a scroll above it is the person's. */
  let placedAt = 0;
  /** A card waiting for a decision: kept in view before the newest line below it. */
  let anchor = null;
  /** What waits below while the person reads above; an approval outranks ordinary news. */
  let waiting = null;
  const root = () => document.scrollingElement;
  const end = () => root().scrollHeight - root().clientHeight;

  // Scroll events come a frame late, when the page may have grown again: only a move up, away
  // from where the page put itself, is the person's.
  addEventListener(
    "scroll",
    () => {
      following = root().scrollTop >= end() - NEAR_END || root().scrollTop >= placedAt - 1;
      if (following) caughtUp();
    },
    { passive: true },
  );
  jump.addEventListener("click", () => follow());

  function caughtUp() {
    waiting = null;
    jump.hidden = true;
  }

  /** The end, or as near it as keeps the waiting card wholly above the composer. */
  function place() {
    let top = end();
    if (anchor?.isConnected) {
      const room = innerHeight - composer.offsetHeight;
      const box = anchor.getBoundingClientRect();
      const cardTop = box.top + root().scrollTop;
      const cardBottom = box.bottom + root().scrollTop;
      const wholly = cardTop - MARGIN >= top && cardBottom + MARGIN <= top + room;
      // Its end above the composer, or (taller than the room) its start at the top.
      if (!wholly) top = box.height + 2 * MARGIN > room ? cardTop - MARGIN : cardBottom + MARGIN - room;
    }
    placedAt = Math.max(0, Math.min(top, end()));
    root().scrollTo({ top: placedAt, behavior: "instant" });
  }

  function follow() {
    following = true;
    caughtUp();
    place();
  }

  return {
    /** Content was added or grew: follow it (once a frame), or say what waits below. */
    changed(what = NEWS) {
      if (!following) {
        if (waiting !== APPROVAL_NEWS) waiting = what;
        jump.textContent = `${waiting} ↓`;
        jump.hidden = false;
        return;
      }
      if (scheduled) return;
      scheduled = true;
      requestAnimationFrame(() => {
        scheduled = false;
        if (following) place();
      });
    },
    /** The person sent a message, or opened a conversation: back to the newest, whatever they were reading. */
    follow,
    /** A card that waits for the person: in view before anything newer, until `release`. */
    hold(card) {
      anchor = card;
    },
    release(card) {
      if (anchor === card) anchor = null;
    },
  };
}
