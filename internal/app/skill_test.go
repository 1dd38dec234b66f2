package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\nallowed-tools: Bash(*)\n---\n" + body + "\n"
}

// TestSkillTool: the model is offered the skill tool with the skills of
// its session's directory (the user's and the project's, less those the
// rules deny), and loading one gives it the skill's instructions; a
// project's skill does not replace the user's of the same name, and a
// directory without skills is not offered the tool.
func TestSkillTool(t *testing.T) {
	t.Parallel()
	for _, npm := range providerKinds {
		t.Run(npm, func(t *testing.T) {
			t.Parallel()
			global, repo := t.TempDir(), t.TempDir()
			write(t, filepath.Join(global, "mine", "SKILL.md"), skillMD("mine", "The user's own skill.", "USER-MARKER"))
			write(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/main\n")
			write(t, filepath.Join(repo, ".claude", "skills", "pdf", "SKILL.md"), skillMD("pdf", "Fill PDF forms.", "PDF-MARKER: run scripts/fill.py"))
			write(t, filepath.Join(repo, ".claude", "skills", "pdf", "scripts", "fill.py"), "print(1)\n")
			write(t, filepath.Join(repo, ".opencode", "skill", "mine", "SKILL.md"), skillMD("mine", "pwned", "PWNED"))
			write(t, filepath.Join(repo, ".opencode", "skill", "secret", "SKILL.md"), skillMD("secret", "Denied.", "SECRET"))
			n, fake := modelNode(t, npm, "", `, "permission": {"skill": {"secret": "deny"}}`, func(c *app.Config) {
				c.Directory, c.SkillDirs = repo, []string{global}
			})
			sid := n.session()
			n.send(sid, `tool:skill:{"name":"pdf"}`+"\nreply:ok")
			req := lastRequest(t, fake)
			var desc string
			for _, tl := range req.Request.Tools {
				if tl.Name == "skill" {
					desc = tl.Description
				}
			}
			for _, want := range []string{"<name>pdf</name>", "<description>Fill PDF forms.</description>", "<name>mine</name>",
				"<description>The user's own skill.</description>"} {
				if !strings.Contains(desc, want) {
					t.Errorf("the skill tool's description lacks %q:\n%s", want, desc)
				}
			}
			if strings.Contains(desc, "secret") || strings.Contains(desc, "pwned") {
				t.Errorf("the description lists a denied or replacing skill:\n%s", desc)
			}
			out := toolOutput(t, n, sid, "skill")
			for _, want := range []string{"PDF-MARKER", filepath.Join(repo, ".claude", "skills", "pdf", "scripts", "fill.py")} {
				if !strings.Contains(out, want) {
					t.Errorf("the skill tool's output lacks %q:\n%s", want, out)
				}
			}
			// The denied skill cannot be loaded either.
			n.send(sid, `tool:skill:{"name":"secret"}`+"\nreply:ok")
			if out := toolOutput(t, n, sid, "skill"); !strings.Contains(out, "permission denied") || strings.Contains(out, "SECRET") {
				t.Errorf("loading a denied skill: %s", out)
			}
			// A directory with no skills (the user's removed) is not
			// offered the tool.
			if err := os.RemoveAll(filepath.Join(global, "mine")); err != nil {
				t.Fatal(err)
			}
			n.send(n.sessionIn(t.TempDir()), "reply:ok")
			for _, tl := range lastRequest(t, fake).Request.Tools {
				if tl.Name == "skill" {
					t.Errorf("the skill tool is offered without skills: %s", tl.Description)
				}
			}
		})
	}
}

// toolOutput is the output (or error) of the last call of a tool in the
// session.
func toolOutput(t *testing.T, n *node, sid, name string) string {
	t.Helper()
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == core.PartTool && p.Tool == name {
				out = p.State.Output + p.State.Error
			}
		}
	}
	if out == "" {
		t.Fatalf("no %s call in the session", name)
	}
	return out
}

// sessionIn makes a session working in dir.
func (n *node) sessionIn(dir string) string {
	n.t.Helper()
	resp, err := http.Post(n.app.URL()+"/session?directory="+dir, "application/json", strings.NewReader("{}"))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct{ ID string }
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &s); err != nil || s.ID == "" {
		n.t.Fatalf("session in %s: %d %s", dir, resp.StatusCode, b)
	}
	return s.ID
}

// TestSkillCommands: the skills are listed (GET /skill, GET /api/skill)
// and offered as commands of source "skill" under the names no command
// takes; running one sends the skill's text as it is (a $1 in it stays)
// with the arguments after it.
func TestSkillCommands(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	write(t, filepath.Join(repo, ".opencode", "skill", "deploy", "SKILL.md"), skillMD("deploy", "Deploy it.", "DEPLOY-MARKER: run ./go.sh $1"))
	write(t, filepath.Join(repo, ".opencode", "skill", "review", "SKILL.md"), skillMD("review", "Shadowed.", "SHADOWED"))
	n := startNode(t, func(c *app.Config) { c.Directory, c.SkillDirs = repo, []string{} })
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(n.app.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	var skills []struct{ Name, Description, Location, Content string }
	get("/skill", &skills)
	if len(skills) != 2 || skills[0].Name != "deploy" || skills[0].Content != "DEPLOY-MARKER: run ./go.sh $1" ||
		skills[0].Location != filepath.Join(repo, ".opencode", "skill", "deploy", "SKILL.md") {
		t.Errorf("GET /skill = %+v", skills)
	}
	var v2 struct {
		Location struct{ Directory string }
		Data     []struct{ Name string }
	}
	get("/api/skill?location[directory]="+repo, &v2)
	if v2.Location.Directory != repo || len(v2.Data) != 2 {
		t.Errorf("GET /api/skill = %+v", v2)
	}
	var cmds []struct {
		Name, Source, Template string
		Hints                  []string
	}
	get("/command", &cmds)
	by := map[string]int{}
	for i, c := range cmds {
		by[c.Name] = i
	}
	if c := cmds[by["deploy"]]; c.Source != "skill" || len(c.Hints) != 0 {
		t.Errorf("the deploy skill as a command: %+v", c)
	}
	if c := cmds[by["review"]]; c.Source != "command" || strings.Contains(c.Template, "SHADOWED") {
		t.Errorf("a skill replaced the built-in review command: %+v", c)
	}
	sid := n.session()
	resp, err := http.Post(n.app.URL()+"/session/"+sid+"/command", "application/json",
		strings.NewReader(`{"command":"deploy","arguments":"staging now"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("messages: %v", err)
	}
	text := msgs[0].Parts[0].Text
	for _, want := range []string{"DEPLOY-MARKER: run ./go.sh $1", "Base directory for this skill: " + filepath.Join(repo, ".opencode", "skill", "deploy"), "staging now"} {
		if !strings.Contains(text, want) {
			t.Errorf("the command's prompt lacks %q:\n%s", want, text)
		}
	}
}
