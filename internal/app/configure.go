package app

import (
	"fmt"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/permission"
)

// Apply sets what a configuration file decides: the models and the
// default one, the permission rules, the agents, the instructions, the
// small model and what clients are told of them. dir resolves the file's
// relative references ({file:…} prompts).
func (c *Config) Apply(f config.File, dir string) error {
	models, def, err := f.Build()
	if err != nil {
		return err
	}
	c.Models = models
	c.Engine.DefaultModel = def
	if c.Engine.Permission, err = permission.ParseConfig(f.Permission); err != nil {
		return err
	}
	agents, err := f.Agents(dir)
	if err != nil {
		return err
	}
	c.Engine.Agents = agent.NewSet(agents)
	c.Engine.Instructions = f.Instructions
	if f.SmallModel != "" {
		ref, err := config.ParseModel(f.SmallModel)
		if err != nil {
			return fmt.Errorf("small_model: %w", err)
		}
		if _, _, err := models.Resolve(ref); err != nil {
			return fmt.Errorf("small_model %q: %w", f.SmallModel, err)
		}
		c.Engine.SmallModel = &ref
	}
	catalog := Catalog(f, def, c.Engine.Permission, agents)
	c.Catalog = &catalog
	return nil
}
