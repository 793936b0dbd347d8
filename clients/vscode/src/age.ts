// Relative dates ("3 weeks ago"): the one rule the server (views/age.py) and the Neovim client use too, checked
// against the shared table tests/data/ages.json. No "vscode" import: unit-tested.
//
// Less than a minute (or up to a minute in the future): "just now"; further in the future: the date, YYYY-MM-DD
// (UTC); else the largest unit that fits, in whole units (integer division): minutes below an hour, hours below a
// day, days below a week, weeks below 30 days, months of 30 days (at most 11) below 365 days, years of 365 days.

const MINUTE = 60;
const HOUR = 3600;
const DAY = 86400;

function say(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? "" : "s"} ago`;
}

/** How long before `now` the ISO 8601 date `iso` was, in words; "" for a missing or unreadable date. */
export function relativeDate(iso: string | undefined | null, now: Date = new Date()): string {
  if (!iso) return "";
  const then = new Date(iso);
  if (Number.isNaN(then.getTime())) return "";
  const seconds = Math.trunc((now.getTime() - then.getTime()) / 1000);
  if (seconds < -MINUTE) return then.toISOString().slice(0, 10);
  if (seconds < MINUTE) return "just now";
  if (seconds < HOUR) return say(Math.floor(seconds / MINUTE), "minute");
  if (seconds < DAY) return say(Math.floor(seconds / HOUR), "hour");
  const days = Math.floor(seconds / DAY);
  if (days < 7) return say(days, "day");
  if (days < 30) return say(Math.floor(days / 7), "week");
  if (days < 365) return say(Math.min(11, Math.floor(days / 30)), "month");
  return say(Math.floor(days / 365), "year");
}
