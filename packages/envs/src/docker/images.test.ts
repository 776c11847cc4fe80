/**
 * Local image builds: content hashes, package lists, mirror detection, and that a second
 * `buildImages` is a quick no-op when the images exist (needs Docker and built images).
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildImages,
  debianMirror,
  defaultEnvironmentsDir,
  hashFolder,
  imagesUpToDate,
  readPackageList,
} from "./images.js";
import { isDockerAvailable } from "./runtime.js";

describe("image specs", () => {
  test("the content hash changes with any file of the folder", () => {
    const folder = mkdtempSync(join(tmpdir(), "agentrl-image-"));
    writeFileSync(join(folder, "Dockerfile"), "FROM x\n");
    writeFileSync(join(folder, "packages.txt"), "# comment\nbash\n\npython3 # the checks\n");
    const first = hashFolder(folder);
    assert.equal(hashFolder(folder), first);
    writeFileSync(join(folder, "packages.txt"), "bash\npython3\ngit\n");
    assert.notEqual(hashFolder(folder), first);
    assert.deepEqual(readPackageList(join(folder, "packages.txt")), ["bash", "python3", "git"]);
  });

  test("the project's images are described in environments/", () => {
    const folder = defaultEnvironmentsDir();
    assert.ok(
      readPackageList(join(folder, "os", "packages.txt")).includes("python3"),
      "the OS check scripts need python3",
    );
    assert.ok(readPackageList(join(folder, "db", "packages.txt")).includes("mariadb-server"));
    assert.match(debianMirror(), /^https?:\/\/.+\/debian$/);
  });
});

const engine = await isDockerAvailable();
const built = engine && (await imagesUpToDate().catch(() => false));

describe(
  "buildImages on Docker",
  {
    skip: !engine
      ? "no Docker engine answers"
      : !built
        ? "images not built yet (agentrl env build)"
        : false,
  },
  () => {
    test("a second build skips every image in a moment", async () => {
      const started = Date.now();
      const results = await buildImages();
      assert.ok(results.every((result) => result.skipped));
      assert.ok(Date.now() - started < 5000, "idempotent and quick");
    });
  },
);
