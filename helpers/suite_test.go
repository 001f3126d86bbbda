package helpers_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/suite"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/tape"
)

// overlaySuite uses the helpers the way a testify user does: one Env per
// test method, made from s.T() in SetupTest.
type overlaySuite struct {
	suite.Suite
	env    *helpers.Env
	golden string
	tapes  string
}

func (s *overlaySuite) SetupSuite() {
	s.golden = s.T().TempDir()
	s.tapes = s.T().TempDir()
}

func (s *overlaySuite) SetupTest() {
	s.T().Setenv(tape.EnvDir, s.tapes)
	s.T().Setenv(helpers.EnvUpdateGolden, "1")
	s.env = helpers.NewArchive(s.T(), txtar.Parse([]byte(demo)), helpers.GoldenDir(s.golden))
}

func (s *overlaySuite) TestWrites() {
	s.Require().NoError(afero.WriteFile(s.env.Fs(), s.env.Path("notes.txt"), []byte("suite\n"), 0o644))
	s.True(s.env.Changed("M notes.txt"))
	s.True(s.env.FileContent("notes.txt", "suite\n"))
	s.True(s.env.GoldenPatch())
}

func (s *overlaySuite) TestLeavesNothing() {
	s.True(s.env.NoChanges())
	s.True(s.env.GoldenPatch())
}

// TearDownSuite runs after every test's cleanups: goldens and tapes are
// named after s.T().Name() of each method, as for subtests.
func (s *overlaySuite) TearDownSuite() {
	for _, name := range []string{"TestSuite__TestWrites.patch", "TestSuite__TestLeavesNothing.patch"} {
		_, err := os.Stat(filepath.Join(s.golden, name))
		s.NoError(err, "golden of a suite method")
	}
	matches, _ := filepath.Glob(filepath.Join(s.tapes, "*__TestSuite_TestWrites.tape"))
	s.Len(matches, 1, "tape of a suite method")
}

func TestSuite(t *testing.T) { suite.Run(t, new(overlaySuite)) }
