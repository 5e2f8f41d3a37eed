//! `code_patch`: replace text in a workspace file (or create the file).

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use durable::hash::sha256_hex;
use durable::write::WriteOptions;
use durable::{Dir, RunId};
use serde_json::{json, Value};

use super::str_arg;
use agent::tool::{CallContext, Effect, Lookup, Tool, ToolError, ToolOutput};

/// `code_patch {path, old, new}`: replace the one occurrence of `old` in the
/// workspace file `path` by `new`; with `old` empty, create `path` holding
/// `new` (refused if the file exists).
///
/// Applying a patch twice fails (`old` is gone, or the file exists), so the
/// tool is not idempotent: a marked call with no result goes to its
/// [`lookup`](Tool::lookup), which reads the workspace. Every write is
/// crash-safe ([`durable::write::write_atomic`]) and its SHA-256 goes into the
/// state, so a resume notices a file someone else changed.
///
/// `path` is a file name inside the workspace directory: the [`Dir`] seam
/// admits no subdirectories, `..` or absolute paths, so no patch can reach
/// outside the workspace.
#[derive(Clone, Debug)]
pub struct CodePatch {
    workspace: Arc<dyn Dir>,
    sync: bool,
    /// Asked right before each write whether this process still holds the
    /// run (the workspace is a receiver too).
    fence: Option<Arc<dyn Holds>>,
    /// What each workspace file must hold before a patch acts on it.
    expected: Option<Arc<Mutex<Expected>>>,
}

/// Whether this process still holds a run at an epoch: the fence a patch
/// asks right before its write.
pub trait Holds: Send + Sync + std::fmt::Debug {
    /// `Ok` if the run is still held at `epoch`; else
    /// [`ToolError::Stale`] (another holder took it over) or
    /// [`ToolError::Fatal`] (it cannot be told).
    fn holds(&self, run: &RunId, epoch: u64) -> Result<(), ToolError>;
}

/// The workspace as the run knows it: each file's SHA-256 (a file not
/// named must not exist). It starts as the task's seeds with what the run
/// wrote over them; every patch and every lookup that finds one applied
/// updates it.
#[derive(Clone, Debug, Default)]
pub struct Expected(pub BTreeMap<String, String>);

impl Expected {
    /// `seeds` (name → contents), then `written` (name → SHA-256) over them.
    pub fn new<'a>(
        seeds: impl IntoIterator<Item = (&'a String, &'a String)>,
        written: &BTreeMap<String, String>,
    ) -> Expected {
        let mut known: BTreeMap<String, String> = seeds
            .into_iter()
            .map(|(name, text)| (name.clone(), sha256_hex(text.as_bytes())))
            .collect();
        known.extend(written.iter().map(|(k, v)| (k.clone(), v.clone())));
        Expected(known)
    }
}

/// The arguments of one patch.
struct Patch<'a> {
    path: &'a str,
    old: &'a str,
    new: &'a str,
}

impl<'a> Patch<'a> {
    fn parse(args: &'a Value) -> Result<Patch<'a>, ToolError> {
        Ok(Patch {
            path: str_arg("code_patch", args, "path")?,
            old: str_arg("code_patch", args, "old")?,
            new: str_arg("code_patch", args, "new")?,
        })
    }
}

impl CodePatch {
    /// `code_patch` writing into `workspace`, with synced writes.
    pub fn new(workspace: Arc<dyn Dir>) -> CodePatch {
        CodePatch {
            workspace,
            sync: true,
            fence: None,
            expected: None,
        }
    }

    /// Ask `fence` right before each write whether the run is still held
    /// at the call's epoch: a process that lost the run writes nothing.
    pub fn fenced(mut self, fence: Arc<dyn Holds>) -> CodePatch {
        self.fence = Some(fence);
        self
    }

    /// Refuse to act on a file that does not hold what `expected` says
    /// (a person changed it behind the run's back).
    pub fn expecting(mut self, expected: Expected) -> CodePatch {
        self.expected = Some(Arc::new(Mutex::new(expected)));
        self
    }

    /// The file as the run last knew it must be as it is now.
    fn check_expected(&self, path: &str, content: Option<&str>) -> Result<(), ToolError> {
        let Some(expected) = &self.expected else {
            return Ok(());
        };
        let known = expected.lock().unwrap_or_else(|e| e.into_inner());
        let want = known.0.get(path);
        let found = content.map(|c| sha256_hex(c.as_bytes()));
        if want == found.as_ref() {
            return Ok(());
        }
        let what = match (want, found) {
            (None, _) => "exists, but the run neither seeded nor wrote it".to_owned(),
            (Some(_), None) => "is gone".to_owned(),
            (Some(w), Some(f)) => format!("holds SHA-256 {f}, the run expects {w}"),
        };
        Err(ToolError::Fatal(format!(
            "workspace file changed behind the run's back: {path} {what}; nothing was written"
        )))
    }

    /// Record what `path` holds now, as the run knows it.
    fn learn(&self, path: &str, content: &str) {
        if let Some(expected) = &self.expected {
            let mut known = expected.lock().unwrap_or_else(|e| e.into_inner());
            known
                .0
                .insert(path.to_owned(), sha256_hex(content.as_bytes()));
        }
    }

    /// Whether writes are fsynced (turn off only in sweeps and tests).
    pub fn sync(mut self, sync: bool) -> CodePatch {
        self.sync = sync;
        self
    }

    fn read(&self, path: &str) -> Result<Option<String>, ToolError> {
        match self.workspace.read(path) {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| ToolError::Failed(format!("code_patch: {path} is not UTF-8 text"))),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(ToolError::Failed(format!(
                "code_patch: {path:?} is not a file name inside the workspace ({e})"
            ))),
            Err(e) => Err(ToolError::Failed(format!(
                "code_patch: cannot read {path}: {e}"
            ))),
        }
    }

    /// The file's new text: `new` in place of the one `old` (or a new
    /// file holding `new`); an error the model sees if it cannot apply.
    fn apply(p: &Patch<'_>, content: Option<String>) -> Result<String, ToolError> {
        Ok(match (p.old.is_empty(), content) {
        (true, None) => p.new.to_owned(),
        (true, Some(_)) => {
            return Err(ToolError::Failed(format!(
                "code_patch: {} already exists; give the text to replace in \"old\"",
                p.path
            )))
        }
        (false, None) => {
            return Err(ToolError::Failed(format!(
                "code_patch: no file {} in the workspace",
                p.path
            )))
        }
        (false, Some(c)) => match c.matches(p.old).count() {
            1 => c.replacen(p.old, p.new, 1),
            0 => {
                return Err(ToolError::Failed(format!(
                    "code_patch: the old text is not in {}",
                    p.path
                )))
            }
            n => {
                return Err(ToolError::Failed(format!(
                    "code_patch: the old text occurs {n} times in {}; give enough of it to occur once",
                    p.path
                )))
            }
        },
    })
    }

    fn done(path: &str, content: &str) -> ToolOutput {
        let out = ToolOutput::default().with_file(path, content.as_bytes());
        let sha = out.files.get(path).cloned().unwrap_or_default();
        ToolOutput {
            output: json!({ "patched": path, "sha256": sha }).to_string(),
            ..out
        }
    }

    /// Did this patch happen? `Found` if the file holds `new` and not
    /// `old`; certainly not if it holds `old` and not `new` (applied, it
    /// would hold `new`), or if the file a creation makes is missing; else
    /// it cannot tell (both texts, as when `new` contains `old`; neither, as
    /// when someone else changed the file).
    fn inspect(&self, p: &Patch<'_>) -> Lookup {
        let content = match self.read(p.path) {
            Ok(c) => c,
            Err(e) => return Lookup::CantTell(e.to_string()),
        };
        match (p.old.is_empty(), content) {
            (true, None) => Lookup::NotFound,
            (true, Some(c)) if c.contains(p.new) => {
                self.learn(p.path, &c);
                Lookup::Found(CodePatch::done(p.path, &c))
            }
            (false, None) => Lookup::CantTell(format!(
                "{} is missing, so neither the old nor the new text is there",
                p.path
            )),
            (false, Some(c)) => {
                let has_old = c.contains(p.old);
                let has_new = c.contains(p.new);
                if has_new && !has_old {
                    self.learn(p.path, &c);
                    Lookup::Found(CodePatch::done(p.path, &c))
                } else if has_old && (!has_new || p.new.is_empty()) {
                    // Applied, the file would hold `new`.
                    Lookup::NotFound
                } else {
                    Lookup::CantTell(format!(
                        "{} holds {} of the patch's texts",
                        p.path,
                        if has_old { "both" } else { "neither" }
                    ))
                }
            }
            (true, Some(_)) => Lookup::CantTell(format!(
                "{} exists but does not hold the text the patch creates",
                p.path
            )),
        }
    }
}

impl Tool for CodePatch {
    fn name(&self) -> &str {
        "code_patch"
    }
    fn description(&self) -> &str {
        "Edit a file of the workspace: replace the one occurrence of `old` in file `path` by `new`. With `old` empty, create `path` holding `new` (refused if the file exists). `path` is a plain file name."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "old": {"type": "string", "description": "text that occurs exactly once in the file, or empty to create it"},
            "new": {"type": "string"}},
            "required": ["path", "old", "new"], "additionalProperties": false})
    }
    fn effect(&self) -> Effect {
        Effect::Changes
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        Patch::parse(args).map_or_else(|_| Vec::new(), |p| vec![p.path.to_owned()])
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let p = Patch::parse(args)?;
        // A process that lost the run is told so first, whatever the
        // newer holder did to the file.
        if let Some(fence) = &self.fence {
            fence.holds(ctx.run, ctx.epoch)?;
        }
        let content = self.read(p.path)?;
        self.check_expected(p.path, content.as_deref())?;
        let patched = CodePatch::apply(&p, content)?;
        let opts = WriteOptions {
            sync: self.sync,
            points: false,
        };
        // A failed write may or may not have replaced the file (the rename
        // is done before the directory sync): the outcome is unknown, and
        // the lookup will read the workspace to settle it.
        // The fence is asked after the temp file is written, right before
        // the rename that makes the patch: a process that lost the run
        // writes nothing.
        let mut stale = None;
        let mut check = || match &self.fence {
            Some(fence) => fence.holds(ctx.run, ctx.epoch).map_err(|e| {
                let shown = e.to_string();
                stale = Some(e);
                io::Error::other(shown)
            }),
            None => Ok(()),
        };
        let written = durable::write::write_atomic_checked(
            self.workspace.as_ref(),
            p.path,
            patched.as_bytes(),
            opts,
            &mut check,
        );
        if let Some(e) = stale {
            return Err(e);
        }
        written.map_err(|e| ToolError::Unknown(format!("code_patch: writing {}: {e}", p.path)))?;
        self.learn(p.path, &patched);
        Ok(CodePatch::done(p.path, &patched))
    }
    fn lookup(&self, _ctx: &CallContext<'_>, args: &Value) -> Lookup {
        match Patch::parse(args) {
            Ok(p) => self.inspect(&p),
            Err(e) => Lookup::CantTell(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable::testing::{Call, FaultDir, MemDir};
    use durable::RunId;

    fn patch(
        ws: &MemDir,
        path: &str,
        old: &str,
        new: &str,
    ) -> (Result<ToolOutput, ToolError>, Lookup) {
        let tool = CodePatch::new(Arc::new(ws.clone())).sync(false);
        let run = RunId::parse("r").unwrap();
        let ctx = CallContext {
            run: &run,
            call_id: "c1",
            key: None,
            epoch: 1,
            messages: &[],
        };
        let args = json!({ "path": path, "old": old, "new": new });
        let before = tool.lookup(&ctx, &args);
        (tool.call(&ctx, &args), before)
    }

    fn read(ws: &dyn Dir, path: &str) -> String {
        String::from_utf8(ws.read(path).unwrap().unwrap()).unwrap()
    }

    #[test]
    fn creates_replaces_and_refuses_a_second_application() {
        let ws = MemDir::new();
        let (r, before) = patch(&ws, "a.rs", "", "fn a() { x.unwrap() }");
        assert_eq!(before, Lookup::NotFound);
        let out = r.unwrap();
        assert_eq!(read(&ws, "a.rs"), "fn a() { x.unwrap() }");
        assert_eq!(out.files.len(), 1);
        assert!(
            out.output.contains("\"patched\":\"a.rs\""),
            "{}",
            out.output
        );

        // Creating again fails; the lookup finds the creation.
        let (r, before) = patch(&ws, "a.rs", "", "fn a() { x.unwrap() }");
        assert!(matches!(r, Err(ToolError::Failed(m)) if m.contains("already exists")));
        assert_eq!(before, Lookup::Found(out));

        let (r, before) = patch(&ws, "a.rs", "unwrap()", "unwrap_or_default()");
        assert_eq!(before, Lookup::NotFound);
        let out = r.unwrap();
        assert_eq!(read(&ws, "a.rs"), "fn a() { x.unwrap_or_default() }");
        let (r, before) = patch(&ws, "a.rs", "unwrap()", "unwrap_or_default()");
        assert!(matches!(r, Err(ToolError::Failed(m)) if m.contains("not in a.rs")));
        assert_eq!(before, Lookup::Found(out));
    }

    #[test]
    fn lookup_cannot_tell_when_the_texts_do_not_decide() {
        let ws = MemDir::new();
        // `new` contains `old`: once applied, both are there.
        patch(&ws, "b.rs", "", "let x = 1;").0.unwrap();
        let (r, before) = patch(&ws, "b.rs", "x = 1", "x = 1 + 1");
        assert_eq!(before, Lookup::NotFound);
        r.unwrap();
        let (_, after) = patch(&ws, "b.rs", "x = 1", "x = 1 + 1");
        assert!(matches!(after, Lookup::CantTell(_)), "{after:?}");
        // Neither text: someone else changed the file.
        let (_, before) = patch(&ws, "b.rs", "y = 2", "y = 3");
        assert!(matches!(before, Lookup::CantTell(_)), "{before:?}");
        // A missing file that the patch would change.
        let (r, before) = patch(&ws, "c.rs", "a", "b");
        assert!(matches!(before, Lookup::CantTell(_)));
        assert!(matches!(r, Err(ToolError::Failed(_))));
    }

    #[test]
    fn refuses_paths_outside_the_workspace_and_ambiguous_patches() {
        let ws = MemDir::new();
        for path in ["../x", "a/b", "", ".."] {
            let (r, _) = patch(&ws, path, "", "x");
            assert!(
                matches!(&r, Err(ToolError::Failed(m)) if m.contains("not a file name")),
                "{path}: {r:?}"
            );
        }
        patch(&ws, "d.rs", "", "aa").0.unwrap();
        let (r, _) = patch(&ws, "d.rs", "a", "b");
        assert!(matches!(r, Err(ToolError::Failed(m)) if m.contains("occurs 2 times")));
    }

    #[test]
    fn a_failed_read_is_reported_as_such_not_as_a_bad_path() {
        let ws = FaultDir::new(MemDir::new());
        ws.write("a.rs", b"fn a() {}").unwrap();
        ws.fail_every(Call::Read, io::ErrorKind::PermissionDenied);
        let tool = CodePatch::new(Arc::new(ws.clone())).sync(false);
        let run = RunId::parse("r").unwrap();
        let ctx = CallContext {
            run: &run,
            call_id: "c1",
            key: None,
            epoch: 1,
            messages: &[],
        };
        let args = json!({ "path": "a.rs", "old": "a()", "new": "b()" });
        let r = tool.call(&ctx, &args);
        assert!(
            matches!(&r, Err(ToolError::Failed(m)) if m.starts_with("code_patch: cannot read a.rs: ")),
            "{r:?}"
        );
        // The lookup cannot read the file either, so it cannot tell.
        let l = tool.lookup(&ctx, &args);
        assert!(
            matches!(&l, Lookup::CantTell(m) if m.contains("cannot read a.rs")),
            "{l:?}"
        );
        ws.heal();
        assert_eq!(read(&ws, "a.rs"), "fn a() {}");
    }

    #[test]
    fn a_creation_is_found_only_if_the_file_holds_its_text() {
        let ws = MemDir::new();
        patch(&ws, "e.rs", "", "someone else's").0.unwrap();
        // The file exists, but not with what this creation writes: not the
        // creation's doing, and not certainly undone either.
        let (r, before) = patch(&ws, "e.rs", "", "mine");
        assert!(
            matches!(&before, Lookup::CantTell(m) if m.contains("does not hold the text")),
            "{before:?}"
        );
        assert!(matches!(r, Err(ToolError::Failed(m)) if m.contains("already exists")));
        assert_eq!(read(&ws, "e.rs"), "someone else's");
    }

    #[test]
    fn names_itself_and_declares_the_file_it_touches() {
        let tool = CodePatch::new(Arc::new(MemDir::new()));
        assert_eq!(tool.name(), "code_patch");
        assert_eq!(tool.effect(), Effect::Changes);
        let args = json!({ "path": "src.rs", "old": "a", "new": "b" });
        assert_eq!(tool.touches(&args), ["src.rs"]);
        // Arguments that are no patch touch nothing.
        assert!(tool.touches(&json!({ "path": "src.rs" })).is_empty());
        assert!(tool
            .touches(&json!({ "path": 1, "old": "", "new": "" }))
            .is_empty());
    }
}
