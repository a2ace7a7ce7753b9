package main

import (
	_ "github.com/docker/docker/client"
	_ "github.com/google/go-github/v60/github"
	_ "github.com/olekukonko/tablewriter"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/sethvargo/go-githubactions"
	_ "github.com/spf13/cobra"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/anthropics/anthropic-sdk-go/v2"
)

func main() {}
