package app_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
)

func TestEventRetentionConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json    string
		age     time.Duration
		count   int
		wantErr bool
	}{
		{json: `{}`},
		{json: `{"agentd":{"events":{"maxAge":"2h","maxCount":5000}}}`, age: 2 * time.Hour, count: 5000},
		{json: `{"agentd":{"events":{"maxAge":"soon"}}}`, wantErr: true},
		{json: `{"agentd":{"events":{"maxCount":-1}}}`, wantErr: true},
	} {
		var f config.File
		if err := json.Unmarshal([]byte(tc.json), &f); err != nil {
			t.Fatal(err)
		}
		var c app.Config
		err := c.Apply(f, t.TempDir())
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v", tc.json, err)
			continue
		}
		if !tc.wantErr && (c.EventMaxAge != tc.age || c.EventMaxCount != tc.count) {
			t.Errorf("%s: retention %v / %d", tc.json, c.EventMaxAge, c.EventMaxCount)
		}
	}
}
