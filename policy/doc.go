// Package policy decides, for every path inside the agent's home
// (/home/agent), what the agent may do with it. Enforcement happens elsewhere
// (the overlay and FUSE layers); this package only answers questions.
//
// # Permissions
//
// Four levels, ordered none < view < read < write:
//
//	none   the path does not exist for the agent: lookup fails with ENOENT, it is
//	       absent from directory listings, and it cannot be created
//	view   stat and directory listing work; opening the content fails (EACCES)
//	read   content is readable; every change fails
//	write  full access
//
// Each path is decided on its own. How an operation touching several paths is
// checked (creating an entry in a directory, renaming or removing a directory
// with content) is up to the enforcement layer; MayRestrictBelow tells it
// cheaply when a directory holds nothing below write.
//
// # Paths
//
// Decide and the other queries take paths relative to the home,
// slash-separated, without a leading slash: "ws/.env", ".ssh/id_rsa",
// "ws/a/b/secrets/x". "" is the home itself, which is never below view. Empty
// and "." components are ignored; a ".." component is never resolved and makes
// the answer none. The workspace directory lives at "<workspace>/" inside the
// home, so its files appear as "ws/..." when the workspace is named ws.
//
// # Rules and patterns
//
// A rule is a pattern and a permission. Patterns follow gitignore:
//
//	a*b      '*': any run of characters within one path component, including a
//	         leading '.' ("*" matches .env)
//	a?b      '?': any one character, not '/'
//	[a-z]    one character from a class; [!a-z] or [^a-z] negates; a ']' right
//	         after the '[' is literal; '\' escapes inside the class
//	**       as a whole component: any number of directories, including none;
//	         "**/x" = x at any depth, "a/**/b" = a/b, a/x/b, a/x/y/b...,
//	         "a/**" = everything strictly inside a (not a itself), "**" = everything
//	\c       the character c literally: "\*", "\[", "\ ", "\\", "\!"
//	/x       leading slash: anchored at the home root ("/ws/src" is only ws/src)
//	x        no leading slash: at any depth, even when x contains a '/':
//	         ".git/config" matches .git/config and ws/.git/config, "secrets/db"
//	         matches ws/a/secrets/db
//	x/       trailing slash: directories only
//
// Unlike gitignore, a slash in the middle of a pattern does not anchor it: the
// workspace itself lives below the home root, and a restriction that silently
// missed it would be unsafe. Anchored patterns are anchored at the home root,
// not at the workspace: "/src/**" is the home's src/; write "/ws/src/**" for the
// workspace's (art may later offer a workspace-relative form).
//
// A rule covers what it matches and everything below it: "secrets/" (or
// "secrets") applied to ws/secrets also applies to ws/secrets/a/b.txt; a more
// specific rule can override it for a sub-path (see Precedence). "x/" matches a
// directory named x and everything in it, but not a file named x.
//
// Rejected patterns (each error names the cause and the fix): empty, longer than
// 4096 bytes, containing NUL or invalid UTF-8, leading or trailing (unescaped)
// white space, a leading '!' (negation is not supported: add a more specific
// rule instead), "/" alone, empty components ("a//b"), "." or ".." components,
// an unclosed '[', a reversed range ("[z-a]"), named classes ("[:alpha:]"),
// "***", "**" inside a component ("a**"), an escaped '/' or a trailing lone '\',
// more than 60 components.
//
// # Precedence
//
// Of all the rules that match a path (itself or one of its ancestor
// directories), the most specific wins; no rule: the default applies.
// Specificity, compared in this order, on the pattern as written:
//
//  1. a pattern without any '*' (and so without "**") beats one with '*';
//  2. fewer wildcards wins ('*', '?', '[...]' and '**' count one each);
//  3. a longer literal prefix wins: the characters before the first wildcard,
//     counting a leading or trailing '/' and counting an escape "\c" as one;
//  4. otherwise the later rule wins.
//
// So "secrets/" none with "secrets/README" read makes that README readable (a
// longer literal prefix); ".git/**" none with ".git/config" read makes
// .git/config readable (no '*'). Catch-all rules such as "**" lose to almost
// everything: set the default permission instead.
//
// Specificity is a property of the pattern, not of how close to the path it
// matched, so a broad grant can beat a narrow restriction: "/ws/**" write and
// "*.pem" none both have one '*', and "/ws/**" has the longer literal prefix,
// so ws/key.pem is write. A grant meant to yield to every restriction of the
// presets should have two wildcards: "/ws/**/*" (everything inside ws) loses to
// "*.pem", ".env" and the rest. Explain shows which rule won and why.
//
// # Sources
//
// A policy combines, in increasing priority: the host's .art/config/policy.json
// ({"default": "write", "rules": [{"pattern": "...", "permission": "..."}]}, or
// a bare array of rules; a rule may also set "ignore_case": true), the preset
// (--preset NAME), then each --allow PATTERN=PERM in order. Rules of all sources
// are concatenated in that order and compared by precedence: a later source
// overrides an earlier one when their matching rules are equally specific, and
// a more specific rule wins whatever its source. The default permission is
// write, unless policy.json sets one, unless the preset sets one (only read-only
// does). Build does exactly this; New takes the sources as rule lists.
//
// # Case
//
// Matching is case-sensitive, like git on Linux: "Makefile" does not match
// "makefile". Rules with IgnoreCase ("ignore_case": true in policy.json) match
// regardless of case using Unicode simple case folding (as strings.EqualFold).
// Every preset rule ignores case: a secret named .ENV or Secrets/, or a hook in
// .GIT/hooks/, is just as dangerous, notably once exported to a
// case-insensitive file system (macOS, Windows).
//
// # Hidden directories with visible content
//
// A path is reachable only if every directory above it is at least view. So
// that a more specific rule inside a hidden directory is not dead, Decide
// raises a directory that would be none to view when something below it may be
// visible; its listing then shows only the visible entries (each entry is
// decided on its own). Precisely, a none directory becomes view when:
//
//   - it is none by default (no rule matches it) and any rule giving more than
//     none may match a path below it: with default none, "/ws/src/" write makes
//     ws view (listing only src). An unanchored grant such as "ws/src/" or
//     "*.md" may match below any directory, so it makes every directory view
//     (with listings showing only what is visible): anchor allow-lists;
//   - it is none by a rule, and a more specific rule giving more than none names
//     a path inside it: with "secrets/" none and "secrets/README" read, the
//     directory secrets is view and lists only README. Matching inside only
//     through the implicit any-depth prefix of an unanchored pattern does not
//     count: with "secrets/" none and "node_modules/" write, secrets stays none
//     (so secrets/x/node_modules, though write by itself, is unreachable; Explain
//     says so). This keeps secret directories hidden from unrelated rules.
//
// The home itself ("") is never below view.
//
// # Presets
//
// Every preset rule ignores case and matches at any depth.
//
//	full-access  no rules, no default: what policy.json and --allow give; with
//	             neither, everything is write. The default preset.
//	development  secrets are none: .env, .env.*, *.pem, *.key, id_rsa*,
//	             id_ed25519*, id_ecdsa*, id_dsa*, .ssh/, .aws/, .gnupg/, .netrc,
//	             credentials*, secrets/
//	agent-safe   development, plus read for files that run code on the user's
//	             machine once exported: .git/hooks/, .git/config,
//	             .git/modules/**/hooks/, .git/modules/**/config,
//	             .git/commondir, .git/config.worktree,
//	             .git/modules/**/commondir, .git/modules/**/config.worktree,
//	             .gitmodules,
//	             .gitconfig, .envrc, .vscode/, .idea/, .mcp.json,
//	             .claude/settings.json, .claude/settings.local.json, shell startup
//	             files (.bashrc, .bash_profile, .bash_login, .bash_logout,
//	             .bash_aliases, .profile, .zshrc, .zshenv, .zprofile, .zlogin,
//	             .zlogout, .kshrc, .cshrc, .tcshrc, .config/fish/)
//	read-only    default read, no rules (policy.json and --allow rules still apply)
//
// A preset rule is overridden like any other: --allow '.env=read' (equally
// specific, later source) exposes .env files read-only.
//
// # Performance
//
// Patterns are compiled once by New; a Policy is immutable and safe for
// concurrent use. Decide does not allocate (for paths of up to 24 components);
// with twenty rules it takes about 0.2 µs for typical paths (see
// BenchmarkDecide20Rules). IsFullAccess lets callers skip all checks.
package policy
