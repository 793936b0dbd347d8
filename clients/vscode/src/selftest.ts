// Setting-gated self-test hook: appends one JSON object per line to backstory.test.resultsFile.
// Used by the end-to-end test to assert on what the extension showed, instead of on pixels.
import * as fs from "node:fs";
import * as path from "node:path";

export class SelfTest {
  constructor(private readonly file: () => string) {}

  get enabled(): boolean {
    return !!this.file();
  }

  write(event: string, data: Record<string, unknown>): void {
    const file = this.file();
    if (!file) return;
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.appendFileSync(file, JSON.stringify({ event, time: new Date().toISOString(), ...data }) + "\n");
    } catch {
      // A test hook must never break the extension.
    }
  }
}
